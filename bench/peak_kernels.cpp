// Peak measurements (bench/peak_kernels.h) and the peak/ benchmarks.
#include "bench/peak_kernels.h"

#include <omp.h>

#include <chrono>
#include <cstdlib>
#include <vector>

#include "bench/bench_support.h"
#include "bench/registrations.h"
#include "engine/anvil/anvil.h"

namespace anvil::bench {
namespace detail {
float fma_loop_avx512(std::int64_t iters);
float fma_loop_avx2(std::int64_t iters);
}  // namespace detail

namespace {
bool has_avx512() { return __builtin_cpu_supports("avx512f"); }
bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

const char* fma_isa() { return has_avx512() ? "avx512" : has_avx2() ? "avx2" : "none"; }

double measure_fma_flops(int threads, double seconds) {
  const bool wide = has_avx512();
  if (!wide && !has_avx2()) return 0.0;
  const double flops_per_iter = 12.0 * (wide ? 16 : 8) * 2.0;
  auto loop = [wide](std::int64_t n) { return wide ? detail::fma_loop_avx512(n) : detail::fma_loop_avx2(n); };
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

void register_peak_benchmarks() {
  for (int t : options().threads) {
    benchmark::RegisterBenchmark(anvil::detail::str_cat("peak/fma_", fma_isa(), "/threads:", t).c_str(),
                                 [t](benchmark::State& st) {
      double flops = 0;
      for (auto _ : st) flops = measure_fma_flops(t, 0.2);
      st.counters["FLOP/s"] = flops;
      st.counters["per_core_GFLOP/s"] = flops / t / 1e9;
    })->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(anvil::detail::str_cat("peak/stream_triad/threads:", t).c_str(),
                                 [t](benchmark::State& st) {
      double bw = 0;
      for (auto _ : st) bw = measure_triad_bandwidth(t, 32 << 20, 6);  // 3 x 128 MiB
      st.counters["bytes/s"] = bw;
    })->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);
  }
}

}  // namespace anvil::bench
