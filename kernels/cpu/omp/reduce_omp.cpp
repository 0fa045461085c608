// Reductions over the middle axis of x viewed as [outer, reduce, inner] (sum, mean via scale,
// max with indices), f32/f64. OpenMP over outer*inner; a reduction over the last axis
// (inner == 1) accumulates each row in double.
#include <omp.h>

#include <limits>
#include <vector>

#include "engine/dispatch/reduce_problem.h"
#include "kernels/cpu/omp/omp_kernels.h"

namespace anvil::kernels {

template <typename T>
void reduce_sum(const T* x, T* out, std::int64_t outer, std::int64_t reduce, std::int64_t inner,
                double scale) {
  if (inner == 1) {
#pragma omp parallel for schedule(static) if (outer * reduce >= 65536)
    for (std::int64_t o = 0; o < outer; ++o) {
      double acc = 0.0;
      const T* row = x + o * reduce;
      for (std::int64_t r = 0; r < reduce; ++r) acc += static_cast<double>(row[r]);
      out[o] = static_cast<T>(acc * scale);
    }
    return;
  }
  // Column sums: accumulate rows into a double buffer per (outer, inner-chunk).
  constexpr std::int64_t kChunk = 1024;
  const std::int64_t chunks = (inner + kChunk - 1) / kChunk;
#pragma omp parallel for collapse(2) schedule(static) if (outer * reduce * inner >= 65536)
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t i0 = c * kChunk, n = std::min(kChunk, inner - i0);
      double acc[kChunk];
      for (std::int64_t i = 0; i < n; ++i) acc[i] = 0.0;
      for (std::int64_t r = 0; r < reduce; ++r) {
        const T* row = x + (o * reduce + r) * inner + i0;
        for (std::int64_t i = 0; i < n; ++i) acc[i] += static_cast<double>(row[i]);
      }
      T* dst = out + o * inner + i0;
      for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(acc[i] * scale);
    }
  }
}

template <typename T>
void reduce_max(const T* x, T* out, std::int64_t* index, std::int64_t outer, std::int64_t reduce,
                std::int64_t inner) {
#pragma omp parallel for collapse(2) schedule(static) if (outer * reduce * inner >= 65536)
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i = 0; i < inner; ++i) {
      T best = -std::numeric_limits<T>::infinity();
      std::int64_t arg = 0;
      for (std::int64_t r = 0; r < reduce; ++r) {
        const T v = x[(o * reduce + r) * inner + i];
        if (v > best || (r == 0) || (v != v && best == best)) {  // NaN propagates
          best = v;
          arg = r;
        }
      }
      out[o * inner + i] = best;
      index[o * inner + i] = arg;
    }
  }
}

template void reduce_sum<float>(const float*, float*, std::int64_t, std::int64_t, std::int64_t, double);
template void reduce_sum<double>(const double*, double*, std::int64_t, std::int64_t, std::int64_t, double);
template void reduce_max<float>(const float*, float*, std::int64_t*, std::int64_t, std::int64_t, std::int64_t);
template void reduce_max<double>(const double*, double*, std::int64_t*, std::int64_t, std::int64_t, std::int64_t);

// `cpu.omp` of the reduce table (engine/dispatch/reduce_problem.h): the kernels above.
void register_reduce_omp() {
  reduce_table().add({
      .name = "cpu.omp",
      .device = DeviceType::cpu,
      .priority = 100,
      .supports = reduce_basic_support,
      .fn = [](const ReduceArgs& a) {
        const auto& p = a.problem;
        auto run = [&](auto zero) {
          using T = decltype(zero);
          if (p.op == ReduceOp::sum)
            reduce_sum<T>(static_cast<const T*>(a.x), static_cast<T*>(a.out), p.outer, p.reduce,
                          p.inner, a.scale);
          else
            reduce_max<T>(static_cast<const T*>(a.x), static_cast<T*>(a.out), a.index, p.outer,
                          p.reduce, p.inner);
        };
        if (p.dtype == DType::f64) run(double{});
        else run(float{});
      },
      .description = "OpenMP over outer*inner, row sums in double",
  });
}

}  // namespace anvil::kernels
