// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the conv2d `cpu.im2col` variant (own im2col/col2im + the gemm table).
namespace anvil::kernels {
void register_conv_im2col();
}  // namespace anvil::kernels
