// SPDX-License-Identifier: Apache-2.0
// anvil_bench: registers every benchmark programmatically, then runs Google Benchmark.
//   anvil_bench --benchmark_filter='gemm/.*/NT/' --anvil_threads=1 --anvil_variant=gemm=cpu.blocked
#include "bench/bench_support.h"
#include "bench/registrations.h"

int main(int argc, char** argv) {
  try {
    anvil::bench::parse_options(argc, argv);
    benchmark::Initialize(&argc, argv, anvil::bench::print_help);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    anvil::bench::add_context();
    if (anvil::bench::options().test_broken_variant) anvil::bench::register_test_variants();
    anvil::bench::register_peak_benchmarks();
    anvil::bench::register_gemm_benchmarks();
    anvil::bench::register_gemm_remedy_benchmarks();
    anvil::bench::register_model_benchmarks();
    anvil::bench::register_kernel_benchmarks();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "anvil_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
