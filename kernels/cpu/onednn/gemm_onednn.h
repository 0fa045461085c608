// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the oneDNN 2.6 GEMM variants `cpu.onednn` (dnnl_sgemm) and
// `cpu.onednn.matmul` (the dnnl::matmul primitive).
namespace anvil::kernels {
void register_gemm_onednn();
}  // namespace anvil::kernels
