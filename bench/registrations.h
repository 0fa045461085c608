#pragma once
// One registration function per benchmark family (bench/*_bench.cpp).
namespace anvil::bench {
void register_peak_benchmarks();   // peak/fma_<isa>/threads:<t>, peak/stream_triad/threads:<t>
void register_gemm_benchmarks();   // gemm/<variant>/<mode>/<shape>/threads:<t>
void register_model_benchmarks();  // model/<name>/<phase>/batch:<b>/threads:<t>
void register_kernel_benchmarks(); // kernel/<op>/<variant>/<pass>/<model>:<layer>/threads:<t>
}  // namespace anvil::bench
