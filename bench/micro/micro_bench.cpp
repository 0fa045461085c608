// SPDX-License-Identifier: Apache-2.0
// anvil_micro_bench: per-call costs that must stay small (Google Benchmark, one process).
//   micro/select/<op>[/threads:t]: VariantTable::select() for a typical CPU problem: every op
//     call pays it (a memo hit: Note [Selection memo]);
//   micro/select_uncached/<op>[/threads:t]: the full decision (candidate list, supports(),
//     forcing, heuristic), which every call paid before the memo: the side-by-side baseline;
//   micro/op/relu/n:4096: a whole small op call (allocation-free unary_into), for scale;
//   micro/relu_select/<kernel>/<fwd|bwd>/n:<n>: one thread of the dense f32 relu vector select
//     (Note [ReLU selects]): `current` is the production kernel (kernels/cpu/omp), `nan_to_zero`
//     a copy of the select it replaced (a > 0 ? a : 0), kept here as the side-by-side baseline.
//   anvil_micro_bench --benchmark_filter=relu_select --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/elementwise_problem.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/pool_problem.h"
#include "engine/ops/elementwise.h"
#include "kernels/cpu/omp/omp_kernels.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/register.h"

#pragma GCC diagnostic ignored "-Wpsabi"  // vectors stay inside always_inline helpers

namespace {

using namespace anvil;
namespace vec = anvil::kernels::vec;

// The relu selects before NaN propagation (a > 0 ? a : 0 and x > 0 ? dy : 0): the baseline.
ANVIL_VEC_CLONES void relu_nan_to_zero(const float* a, float* out, std::int64_t n) {
  const vec::f32v zero{};
  std::int64_t i = 0;
  for (; i + vec::kLanes <= n; i += vec::kLanes) {
    const vec::f32v v = vec::load(a + i);
    vec::store(out + i, v > zero ? v : zero);
  }
  for (; i < n; ++i) out[i] = a[i] > 0.0f ? a[i] : 0.0f;
}
ANVIL_VEC_CLONES void relu_backward_nan_to_zero(const float* x, const float* dy, float* out,
                                                std::int64_t n) {
  const vec::f32v zero{};
  std::int64_t i = 0;
  for (; i + vec::kLanes <= n; i += vec::kLanes) {
    const vec::f32v v = vec::load(x + i);
    vec::store(out + i, v > zero ? vec::load(dy + i) : zero);
  }
  for (; i < n; ++i) out[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

std::vector<float> signed_values(std::int64_t n, std::uint32_t seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::uint32_t s = seed;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<std::int32_t>(s)) * 0x1p-31f;  // [-1, 1), random sign
  }
  return v;
}

template <bool kCurrent, bool kBackward>
void bm_relu_select(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const auto x = signed_values(n, 1), dy = signed_values(n, 2);
  std::vector<float> out(static_cast<std::size_t>(n));
  for (auto _ : state) {
    if constexpr (kBackward) {
      if constexpr (kCurrent)
        kernels::relu_backward_f32(x.data(), dy.data(), out.data(), n);
      else
        relu_backward_nan_to_zero(x.data(), dy.data(), out.data(), n);
    } else {
      if constexpr (kCurrent)
        kernels::relu_f32(x.data(), out.data(), n);
      else
        relu_nan_to_zero(x.data(), out.data(), n);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * 4 * (kBackward ? 3 : 2));
}

ElementwiseProblem relu_problem() {
  ElementwiseProblem p;
  p.op = EwOp::relu;
  p.numel = 4096;
  p.contiguous = true;
  return p;
}

// ResNet-50's layer1 3x3 convolution at batch 16.
ConvProblem resnet_conv_problem() {
  ConvProblem p;
  p.n = 16;
  p.c = p.k = 64;
  p.h = p.w = 56;
  p.r = p.s = 3;
  p.pad_h = p.pad_w = 1;
  return p;
}

// ResNet-50's stem max pool at batch 16 (its heuristic asks oneDNN which implementation runs).
PoolProblem resnet_pool_problem() {
  return make_pool_problem(PoolKind::max, {16, 64, 112, 112}, {3, 3}, {2, 2}, {1, 1}, false, true,
                           DType::f32, Device::cpu(), "micro_bench");
}

// select() (memoised, Note [Selection memo]) and, side by side in the same process,
// select_uncached(): the full decision every call, which is what select() did before the memo.
template <typename Table, typename Problem, bool kMemo>
void bm_select(benchmark::State& state, Table& table, const Problem& p) {
  for (auto _ : state)
    benchmark::DoNotOptimize(kMemo ? &table.select(p) : &table.select_uncached(p));
}

template <bool kMemo>
void register_select(const char* family) {
  const std::string f = family;
  benchmark::RegisterBenchmark((f + "/elementwise").c_str(), [](benchmark::State& s) {
    bm_select<ElementwiseTable, ElementwiseProblem, kMemo>(s, elementwise_table(), relu_problem());
  })->ThreadRange(1, 2);
  benchmark::RegisterBenchmark((f + "/gemm").c_str(), [](benchmark::State& s) {
    bm_select<GemmTable, GemmProblem, kMemo>(s, gemm_table(),
                                             GemmProblem::dense(64, 512, 784, false, true));
  })->ThreadRange(1, 2);
  benchmark::RegisterBenchmark((f + "/conv2d").c_str(), [](benchmark::State& s) {
    bm_select<ConvTable, ConvProblem, kMemo>(s, conv_table(), resnet_conv_problem());
  });
  benchmark::RegisterBenchmark((f + "/max_pool2d").c_str(), [](benchmark::State& s) {
    bm_select<PoolTable, PoolProblem, kMemo>(s, max_pool2d_table(), resnet_pool_problem());
  });
}

void bm_op_relu(benchmark::State& state) {
  NoGradGuard no_grad;
  const Tensor x = Tensor::arange(-2048, 2048, 1), y = Tensor::empty({4096});
  for (auto _ : state) ops::unary_into(EwOp::relu, y, x);
}

}  // namespace

int main(int argc, char** argv) {
  anvil::set_num_threads(1);
  anvil::register_builtin_kernels();
  register_select<true>("micro/select");
  register_select<false>("micro/select_uncached");
  benchmark::RegisterBenchmark("micro/op/relu/n:4096", bm_op_relu);
  // 1024-4096: input and output fit in a 48 KiB L1d together; 8192: L2; 262144: beyond L2.
  for (const std::int64_t n : {1024, 2048, 4096, 8192, 262144}) {
    const std::string s = "/n:" + std::to_string(n);
    benchmark::RegisterBenchmark(("micro/relu_select/nan_to_zero/fwd" + s).c_str(),
                                 bm_relu_select<false, false>)
        ->Arg(n);
    benchmark::RegisterBenchmark(("micro/relu_select/current/fwd" + s).c_str(),
                                 bm_relu_select<true, false>)
        ->Arg(n);
    benchmark::RegisterBenchmark(("micro/relu_select/nan_to_zero/bwd" + s).c_str(),
                                 bm_relu_select<false, true>)
        ->Arg(n);
    benchmark::RegisterBenchmark(("micro/relu_select/current/bwd" + s).c_str(),
                                 bm_relu_select<true, true>)
        ->Arg(n);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
