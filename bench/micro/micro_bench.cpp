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
//   micro/autograd/chain/{forward,forward_backward}: 300 ops on 1-element tensors with autograd
//     (Note [Per-op host overhead]); micro/autograd/conv2d_relu_1x1x3x3: one tiny conv layer.
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

// Note [Per-op host overhead]
// What one op costs the host apart from its arithmetic: dispatch (selection), the output's
// allocation, the autograd node, and in backward the engine's bookkeeping and gradient
// accumulation. On 1- and 9-element tensors the arithmetic is nothing, so ns per op is the
// overhead every op of a step pays on any device (the CUDA path adds its launch on top). A
// ResNet-50 GPU step enqueues ~900 kernels; at the H200's 34.8 ms of host time per TF32 step
// (docs/results/h200_2026-11-28/) that is ~40 us per kernel, which this measures the engine's
// share of. Counter ops_per_s: forward ops per second (ns per op = 1e9 / ops_per_s).
void bm_autograd_chain(benchmark::State& state) {
  const int ops = static_cast<int>(state.range(0));
  const bool backward = state.range(1) != 0;
  Tensor w = Tensor::full({1}, 0.5).set_requires_grad(true);
  Tensor b = Tensor::full({1}, 0.25).set_requires_grad(true);
  const Tensor x0 = Tensor::full({1}, 1.0);
  for (auto _ : state) {
    Tensor x = x0;
    for (int i = 0; i < ops; i += 3) x = relu(x * w + b);  // 3 ops per round
    if (backward) {
      sum(x).backward();
      w.mutable_grad() = Tensor();  // as an optimizer's zero_grad(set_to_none)
      b.mutable_grad() = Tensor();
    }
    benchmark::DoNotOptimize(x.data_ptr());
  }
  state.counters["ops_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()) * ops,
                                                   benchmark::Counter::kIsRate);
}

// One 3x3 convolution (conv2d, bias, relu) on a 1x1x3x3 input, forward and backward: the conv
// path's per-call overhead (problem building, selection, the variant's setup).
void bm_conv_tiny(benchmark::State& state) {
  Tensor x = Tensor::full({1, 1, 3, 3}, 1.0).set_requires_grad(true);
  Tensor w = Tensor::full({1, 1, 3, 3}, 0.1).set_requires_grad(true);
  Tensor bias = Tensor::full({1}, 0.0).set_requires_grad(true);
  for (auto _ : state) {
    Tensor y = relu(conv2d(x, w, bias, Conv2dOptions{.padding = {1, 1}}));
    sum(y).backward();
    for (Tensor* t : {&x, &w, &bias}) t->mutable_grad() = Tensor();
  }
}

}  // namespace

int main(int argc, char** argv) {
  anvil::set_num_threads(1);
  anvil::register_builtin_kernels();
  register_select<true>("micro/select");
  register_select<false>("micro/select_uncached");
  benchmark::RegisterBenchmark("micro/op/relu/n:4096", bm_op_relu);
  benchmark::RegisterBenchmark("micro/autograd/chain/forward", bm_autograd_chain)->Args({300, 0});
  benchmark::RegisterBenchmark("micro/autograd/chain/forward_backward", bm_autograd_chain)
      ->Args({300, 1});
  benchmark::RegisterBenchmark("micro/autograd/conv2d_relu_1x1x3x3/forward_backward", bm_conv_tiny);
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
