// SPDX-License-Identifier: Apache-2.0
// Reductions over the middle axis of x viewed as [outer, reduce, inner] (sum, mean via scale,
// max with indices), f32/f64. OpenMP over outer*inner; a reduction over the last axis
// (inner == 1) accumulates each row in double.
#include <omp.h>

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "engine/dispatch/floating_variant.h"
#include "engine/dispatch/reduce_problem.h"
#include "kernels/cpu/omp/omp_kernels.h"
#include "kernels/cpu/vec_math.h"  // ANVIL_VEC_CLONES

namespace anvil::kernels {
namespace {

// acc[i] += row[i] for i < n, widened to double: a plain loop that GCC vectorises, for f32 in
// AVX-512 / AVX2 / baseline clones (8, 4 or 2 conversions per instruction). The clones matter
// where the rows are in cache: column sums of [4096, 1024], best of 20, 1 thread 1.11 ms
// without them, 0.43-0.53 ms with (2 threads 0.66-0.73 -> 0.36-0.39 ms; dev VM, 2026-11-22).
template <typename T>
__attribute__((always_inline)) inline void add_row_body(const T* __restrict row,
                                                        double* __restrict acc, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) acc[i] += static_cast<double>(row[i]);
}
ANVIL_VEC_CLONES void add_row_f32(const float* row, double* acc, std::int64_t n) {
  add_row_body(row, acc, n);
}
template <typename T>
void add_row(const T* row, double* acc, std::int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    add_row_f32(row, acc, n);
  else
    add_row_body(row, acc, n);
}

}  // namespace

// Note [Column sums by rows]
// out[i] = scale * sum_r x[r, i] for one [reduce, inner] matrix (a bias gradient: the LSTM
// decoder's [4096, 10000], an LSTM layer's [4096, 1024]). Walking it column chunk by column
// chunk reads 4 KiB from each row and jumps a row ahead (a new page per access run, where the
// hardware prefetchers stop), and 1024 columns made one chunk for one thread. Here every thread
// streams its own block of whole rows (columns in blocks of kColumnBlock, 128 KiB of double
// accumulators per thread, L2-resident) and the threads then add their partial sums column by
// column. Accumulation stays in double; the order of additions depends on the thread count
// (rounding to f32 hides that almost always). Best of 20, dev VM, 2026-11-22, chunked -> this:
// [4096, 1024] 1.45 -> 0.51 ms (1 thread), 1.58 -> 0.35 ms (2); [4096, 10000] 20.8 -> 17.4 ms
// and 12.1 -> 10.9 ms, where both are bound by memory bandwidth (~8-15 GB/s on that VM).
constexpr std::int64_t kColumnBlock = 16384;

template <typename T>
void column_sums_by_rows(const T* x, T* out, std::int64_t reduce, std::int64_t inner,
                         double scale) {
  const int nt = omp_get_max_threads();
  const std::int64_t width = std::min(inner, kColumnBlock);
  std::vector<double> partial(static_cast<std::size_t>(nt) * width);
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const std::int64_t r0 = reduce * t / n, r1 = reduce * (t + 1) / n;
    double* acc = partial.data() + static_cast<std::size_t>(t) * width;
    for (std::int64_t i0 = 0; i0 < inner; i0 += width) {
      const std::int64_t w = std::min(width, inner - i0);
      std::fill(acc, acc + w, 0.0);
      for (std::int64_t r = r0; r < r1; ++r) add_row(x + r * inner + i0, acc, w);
#pragma omp barrier
      const std::int64_t c0 = w * t / n, c1 = w * (t + 1) / n;
      for (std::int64_t i = c0; i < c1; ++i) {
        double s = 0.0;
        for (int k = 0; k < n; ++k) s += partial[static_cast<std::size_t>(k) * width + i];
        out[i0 + i] = static_cast<T>(s * scale);
      }
#pragma omp barrier
    }
  }
}

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
  if (outer == 1 && reduce >= 2 * omp_get_max_threads() && reduce * inner >= 65536) {
    column_sums_by_rows(x, out, reduce, inner, scale);
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
      for (std::int64_t r = 0; r < reduce; ++r) add_row(x + (o * reduce + r) * inner + i0, acc, n);
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

template void reduce_sum<float>(const float*, float*, std::int64_t, std::int64_t, std::int64_t,
                                double);
template void reduce_sum<double>(const double*, double*, std::int64_t, std::int64_t, std::int64_t,
                                 double);
template void reduce_max<float>(const float*, float*, std::int64_t*, std::int64_t, std::int64_t,
                                std::int64_t);
template void reduce_max<double>(const double*, double*, std::int64_t*, std::int64_t, std::int64_t,
                                 std::int64_t);

namespace {
// The problem's reduction for element type T.
template <typename T>
void run_omp(const ReduceArgs& a) {
  const auto& p = a.problem;
  if (p.op == ReduceOp::sum)
    reduce_sum<T>(static_cast<const T*>(a.x), static_cast<T*>(a.out), p.outer, p.reduce, p.inner,
                  a.scale);
  else
    reduce_max<T>(static_cast<const T*>(a.x), static_cast<T*>(a.out), a.index, p.outer, p.reduce,
                  p.inner);
}
}  // namespace

// `cpu.omp` of the reduce table (engine/dispatch/reduce_problem.h): the kernels above.
void register_reduce_omp() {
  reduce_table().add({.name = "cpu.omp",
                      .supports = reduce_basic_support,
                      .fn = floating_fn(run_omp<float>, run_omp<double>),
                      .description = "OpenMP over outer*inner, row sums in double"});
}

}  // namespace anvil::kernels
