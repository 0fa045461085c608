// SPDX-License-Identifier: Apache-2.0
#pragma once
// One registration function per benchmark family (bench/*_bench.cpp).
namespace anvil::bench {
void register_peak_benchmarks();  // peak/fma_<isa>/threads:<t>, peak/stream_triad/threads:<t>
void register_gemm_benchmarks();  // gemm/<variant>/<mode>/<shape>/threads:<t>
// gemm_remedy/<variant>/transpose_then_NN/<mode>/<shape>/threads:<t>,
// gemm_remedy/<variant>/<grad_then_update|fold_sgd>/<shape>/threads:<t>
void register_gemm_remedy_benchmarks();
void register_model_benchmarks();  // model/<name>/<phase>/batch:<b>/threads:<t>
void register_kernel_benchmarks();  // kernel/<op>/<variant>/<pass>/<problem>/device:<d>[/threads:<t>]
// Adds the wrong-on-purpose GEMM variant `test.broken` (--anvil_test_broken_variant=on); must
// run before the families above enumerate the variant tables.
void register_test_variants();
}  // namespace anvil::bench
