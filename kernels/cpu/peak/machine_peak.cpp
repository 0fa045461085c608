// SPDX-License-Identifier: Apache-2.0
// The machine-peak measurements (machine_peak.h).
#include "kernels/cpu/peak/machine_peak.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

namespace anvil {
namespace detail {
float fma_loop_avx512(std::int64_t iters);
float fma_loop_avx2(std::int64_t iters);
float bf16_dot_loop_avx512(std::int64_t iters);
}  // namespace detail

namespace {
bool has_avx512() { return __builtin_cpu_supports("avx512f"); }
bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// FLOP/s of `loop` (flops_per_iter per iteration) on `threads` threads for about `seconds`.
template <typename Loop>
double measure_loop_flops(const Loop& loop, double flops_per_iter, int threads, double seconds) {
  // Calibrate the iteration count on one thread, then run all threads together.
  std::int64_t iters = 1 << 16;
  volatile float sink = 0;
  for (;;) {
    const double t0 = now();
    sink = sink + loop(iters);
    if (now() - t0 > seconds / 4 || iters > (std::int64_t(1) << 40)) break;
    iters *= 2;
  }
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {  // best of 3: the host is shared
    const double t0 = now();
#pragma omp parallel num_threads(threads)
    { sink = sink + loop(iters); }
    const double dt = now() - t0;
    best = std::max(best, flops_per_iter * static_cast<double>(iters) * threads / dt);
  }
  return best;
}
}  // namespace

const char* fma_isa() { return has_avx512() ? "avx512" : has_avx2() ? "avx2" : "none"; }

double measure_fma_flops(int threads, double seconds) {
  const bool wide = has_avx512();
  if (!wide && !has_avx2()) return 0.0;
  auto loop = [wide](std::int64_t n) {
    return wide ? detail::fma_loop_avx512(n) : detail::fma_loop_avx2(n);
  };
  return measure_loop_flops(loop, 12.0 * (wide ? 16 : 8) * 2.0, threads, seconds);
}

bool has_bf16_dot() { return __builtin_cpu_supports("avx512bf16"); }

double measure_bf16_dot_flops(int threads, double seconds) {
  if (!has_bf16_dot()) return 0.0;
  return measure_loop_flops(detail::bf16_dot_loop_avx512, 12.0 * 32 * 2.0, threads, seconds);
}

double measure_triad_bandwidth(int threads, std::int64_t n, int reps) {
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  const float s = 3.0f;
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
    const double dt = now() - t0;
    if (r > 0) best = std::max(best, 3.0 * sizeof(float) * static_cast<double>(n) / dt);
  }
  if (a[n / 2] != 7.0f) return 0.0;  // keeps the stores alive and checks them
  return best;
}

}  // namespace anvil
