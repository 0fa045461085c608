// SPDX-License-Identifier: Apache-2.0
// The peak/ benchmarks: the machine's FMA throughput and memory bandwidth
// (kernels/cpu/peak/machine_peak.h), registered beside the other families.
#include "kernels/cpu/peak/machine_peak.h"

#include <benchmark/benchmark.h>

#include "bench/bench_support.h"
#include "bench/registrations.h"
#include "anvil/anvil.h"

namespace anvil::bench {

void register_peak_benchmarks() {
  for (int t : options().threads) {
    benchmark::RegisterBenchmark(
        anvil::detail::str_cat("peak/fma_", fma_isa(), "/threads:", t).c_str(),
        [t](benchmark::State& st) {
          double flops = 0;
          for (auto _ : st) flops = measure_fma_flops(t, 0.2);
          st.counters["FLOP/s"] = flops;
          st.counters["per_core_GFLOP/s"] = flops / t / 1e9;
        })
        ->Iterations(1)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    if (options().peak_bf16_gflops_per_core > 0)  // bf16 rows asked for, and the CPU has it
      benchmark::RegisterBenchmark(
          anvil::detail::str_cat("peak/bf16_dot_avx512/threads:", t).c_str(),
          [t](benchmark::State& st) {
            double flops = 0;
            for (auto _ : st) flops = measure_bf16_dot_flops(t, 0.2);
            st.counters["FLOP/s"] = flops;
            st.counters["per_core_GFLOP/s"] = flops / t / 1e9;
          })
          ->Iterations(1)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
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
