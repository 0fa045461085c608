// SPDX-License-Identifier: Apache-2.0
// The peak/ benchmarks: the machine's FMA throughput and memory bandwidth
// (kernels/cpu/peak/machine_peak.h), registered beside the other families.
#include "kernels/cpu/peak/machine_peak.h"

#include <benchmark/benchmark.h>

#include <string>

#include "bench/bench_support.h"
#include "bench/registrations.h"
#include "anvil/anvil.h"

namespace anvil::bench {

namespace {
// One row timing a FLOP/s ceiling (measure(threads, seconds)) on t threads.
void register_flops_peak(const std::string& name, int t, double (*measure)(int, double)) {
  benchmark::RegisterBenchmark(anvil::detail::str_cat(name, "/threads:", t).c_str(),
                               [t, measure](benchmark::State& st) {
                                 double flops = 0;
                                 for (auto _ : st) flops = measure(t, 0.2);
                                 st.counters["FLOP/s"] = flops;
                                 st.counters["per_core_GFLOP/s"] = flops / t / 1e9;
                               })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}
}  // namespace

void register_peak_benchmarks() {
  for (int t : options().threads) {
    register_flops_peak(anvil::detail::str_cat("peak/fma_", fma_isa()), t, measure_fma_flops);
    if (options().peak_bf16_gflops_per_core > 0)  // bf16 rows asked for, and the CPU has it
      register_flops_peak("peak/bf16_dot_avx512", t, measure_bf16_dot_flops);
    benchmark::RegisterBenchmark(anvil::detail::str_cat("peak/stream_triad/threads:", t).c_str(),
                                 [t](benchmark::State& st) {
                                   double bw = 0;
                                   for (auto _ : st)
                                     bw = measure_triad_bandwidth(t, 32 << 20, 6);  // 3 x 128 MiB
                                   st.counters["bytes/s"] = bw;
                                 })
        ->Iterations(1)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace anvil::bench
