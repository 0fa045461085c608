// Elementwise `cpu.omp`: OpenMP-parallel loops; a flat vectorisable loop when every operand is
// dense, otherwise parallel over the outer runs of the coalesced strided layout
// (Note [Dimension coalescing]).
#include <omp.h>

#include "engine/core/strided_loop.h"
#include "kernels/cpu/elementwise_functors.h"
#include "kernels/cpu/omp/omp_kernels.h"

namespace anvil::kernels {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr std::int64_t kParallelGrain = 32768;

template <typename T>
void run_omp(const ElementwiseArgs& args) {
  T* out = static_cast<T*>(args.out.data);
  const T* a = static_cast<const T*>(args.a.data);
  const T* b = args.b.data ? static_cast<const T*>(args.b.data) : a;
  const T s = static_cast<T>(args.scalar), alpha = static_cast<T>(args.alpha);
  const std::int64_t n = args.problem.numel;
  with_ew_functor<T>(args.problem.op, [&](auto f) {
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
        for (std::int64_t i = 0; i < inner; ++i) o[i] = f(x[i], y[0], s, alpha);
      } else {
        for (std::int64_t i = 0; i < inner; ++i) o[i * s0] = f(x[i * s1], y[i * s2], s, alpha);
      }
    }
  });
}

}  // namespace

void register_elementwise_omp() {
  elementwise_table().add({
      .name = "cpu.omp",
      .device = DeviceType::cpu,
      .priority = 100,
      .supports = nullptr,
      .fn = [](const ElementwiseArgs& a) {
        visit_dtype(a.problem.dtype, [&](auto zero) { run_omp<decltype(zero)>(a); });
      },
      .description = "OpenMP loops, flat when dense",
  });
}

}  // namespace anvil::kernels
