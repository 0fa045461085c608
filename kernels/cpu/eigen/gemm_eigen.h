// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the `cpu.eigen` GEMM variant (Eigen 3.4, AVX-512 code path).
namespace anvil::kernels {
// Adds `cpu.eigen` to gemm_table() and hooks Eigen's thread count to anvil::set_num_threads().
void register_gemm_eigen();
}  // namespace anvil::kernels
