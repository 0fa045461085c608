#pragma once
// Registration entry points of the reference (`ref`) kernels.
namespace anvil::kernels {
void register_gemm_ref();
void register_elementwise_ref();
}  // namespace anvil::kernels
