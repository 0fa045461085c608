// SPDX-License-Identifier: Apache-2.0
// Elementwise `cpu.omp`: OpenMP-parallel loops; a flat vectorisable loop when every operand is
// dense, otherwise parallel over the outer runs of the coalesced strided layout
// (Note [Dimension coalescing]).
#include <omp.h>

#include <algorithm>
#include <type_traits>

#include "engine/core/strided_loop.h"
#include "kernels/cpu/elementwise_functors.h"
#include "kernels/cpu/omp/omp_kernels.h"
#include "kernels/cpu/vec_math.h"

#pragma GCC diagnostic ignored "-Wpsabi"  // vectors stay inside always_inline helpers

namespace anvil::kernels {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr std::int64_t kParallelGrain = 32768;

// Note [ReLU selects]
// GCC compiles the flat loop of relu (a <= 0 ? 0 : a) and relu_backward (x <= 0 ? 0 : dy) with
// branches instead of vector selects ("control flow in loop", -fopt-info-vec), and on
// activations of random sign half of those branches mispredict: perf of a ResNet-50 training
// step (batch 16, 1 thread) put 18 % of its CPU time in these two loops, ~10 cycles per
// element. Dense f32 operands therefore take these vector selects (same results as the functors,
// NaN propagated: Note [NaN propagation]), cloned for AVX-512 / AVX2 / baseline like the other
// vector kernels.
// ResNet-50 training step, batch 16, 1 thread (dev VM, 2026-11-22, 2 rounds of 3 steps, the
// last two of each): 5.38-5.71 s before, 4.27-4.69 s with these.
//
// Note [NaN-propagating relu speed]
// `v <= 0 ? 0 : v` keeps NaN (the comparison is false for it) but GCC cannot fold its load into
// the compare as it did for the NaN-dropping `v > 0 ? v : 0` (predicate and operand order are
// fixed by the expression), so the AVX-512 loop became load, compare, masked move, store (one
// more instruction per vector). Other spellings (`!(0 >= v)`, a bit mask, a max) compile to the
// same or longer sequences. relu therefore does two vectors per iteration, which is at least as
// fast as the old select on this machine (docs/results/relu_nan_speed_2026-11-25.md;
// anvil_micro_bench --benchmark_filter=relu_select).
// Two vectors per iteration in relu: Note [NaN-propagating relu speed].
__attribute__((always_inline)) inline vec::f32v relu_v(vec::f32v v) {
  const vec::f32v zero{};
  return v <= zero ? zero : v;
}
__attribute__((always_inline)) inline void relu_body(const float* a, float* out, std::int64_t n) {
  constexpr std::int64_t kL = vec::kLanes;
  std::int64_t i = 0;
  for (; i + 2 * kL <= n; i += 2 * kL) {  // both loads before the stores: in place is fine
    const vec::f32v v0 = vec::load(a + i), v1 = vec::load(a + i + kL);
    vec::store(out + i, relu_v(v0));
    vec::store(out + i + kL, relu_v(v1));
  }
  for (; i + kL <= n; i += kL) vec::store(out + i, relu_v(vec::load(a + i)));
  for (; i < n; ++i) out[i] = a[i] <= 0.0f ? 0.0f : a[i];
}
__attribute__((always_inline)) inline void relu_backward_body(const float* x, const float* dy,
                                                              float* out, std::int64_t n) {
  const vec::f32v zero{};
  std::int64_t i = 0;
  for (; i + vec::kLanes <= n; i += vec::kLanes) {
    const vec::f32v v = vec::load(x + i);
    vec::store(out + i, v <= zero ? zero : vec::load(dy + i));
  }
  for (; i < n; ++i) out[i] = x[i] <= 0.0f ? 0.0f : dy[i];
}
}  // namespace

ANVIL_VEC_CLONES void relu_f32(const float* a, float* out, std::int64_t n) { relu_body(a, out, n); }
ANVIL_VEC_CLONES void relu_backward_f32(const float* x, const float* dy, float* out,
                                        std::int64_t n) {
  relu_backward_body(x, dy, out, n);
}

namespace {

// The dense f32 relu / relu_backward of Note [ReLU selects], in blocks over the threads; false
// when the problem is not one of them. In place (out == a) is fine: each lane reads before it
// writes, and blocks do not overlap.
bool run_relu_f32(const ElementwiseArgs& args) {
  const auto& p = args.problem;
  if (p.dtype != DType::f32 || !p.contiguous || (p.op != EwOp::relu && p.op != EwOp::relu_backward))
    return false;
  auto* out = static_cast<float*>(args.out.data);
  const auto* a = static_cast<const float*>(args.a.data);
  const auto* b = static_cast<const float*>(args.b.data);
  const std::int64_t n = p.numel;
  constexpr std::int64_t kBlock = 8192;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (std::int64_t k = 0; k < blocks; ++k) {
    const std::int64_t i0 = k * kBlock, len = std::min(kBlock, n - i0);
    if (p.op == EwOp::relu)
      relu_f32(a + i0, out + i0, len);
    else
      relu_backward_f32(a + i0, b + i0, out + i0, len);
  }
  return true;
}

template <typename T>
void run_omp(const ElementwiseArgs& args) {
  if (run_relu_f32(args)) return;
  T* out = static_cast<T*>(args.out.data);
  const T* a = static_cast<const T*>(args.a.data);
  const T* b = args.b.data ? static_cast<const T*>(args.b.data) : a;
  using C = ComputeType<T>;  // Note [Elementwise in 16-bit storage]
  const C s = static_cast<C>(args.scalar), alpha = static_cast<C>(args.alpha);
  const std::int64_t n = args.problem.numel;
  with_ew_storage_functor<T>(args.problem.op, [&](auto f) {
    if (args.problem.contiguous) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
      for (std::int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i], s, alpha);
      return;
    }
    const auto L = ew_layout(args);
    const std::int64_t inner = L.inner_size();
    const std::int64_t s0 = L.inner_stride(0), s1 = L.inner_stride(1), s2 = L.inner_stride(2);
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (std::int64_t r = 0; r < L.outer_count(); ++r) {
      const auto off = L.outer_offsets(r);
      T* o = out + off[0];
      const T* x = a + off[1];
      const T* y = b + off[2];
      if (s0 == 1 && s1 == 1 && s2 == 1) {
        for (std::int64_t i = 0; i < inner; ++i) o[i] = f(x[i], y[i], s, alpha);
      } else if (s0 == 1 && s1 == 1 && s2 == 0) {  // row-broadcast b (bias-like)
        // y[0] read once: o might alias it, and re-reading it per element kept the loop scalar.
        const T yb = y[0];
        for (std::int64_t i = 0; i < inner; ++i) o[i] = f(x[i], yb, s, alpha);
      } else {
        for (std::int64_t i = 0; i < inner; ++i) o[i * s0] = f(x[i * s1], y[i * s2], s, alpha);
      }
    }
  });
}

// The kernel for the problem's dtype (all six; bf16/f16 computed in f32).
void run_any(const ElementwiseArgs& a) {
  visit_all_dtypes(a.problem.dtype, [&](auto t) { run_omp<decltype(t)>(a); });
}

}  // namespace

void register_elementwise_omp() {
  elementwise_table().add({
      .name = "cpu.omp",
      .fn = run_any,
      .description = "OpenMP loops, flat when dense",
  });
}

}  // namespace anvil::kernels
