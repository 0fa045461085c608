// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the oneDNN 2.6 pooling (`cpu.onednn` in max_pool2d, avg_pool2d,
// adaptive_avg_pool2d) and batch-norm (`cpu.onednn` in batch_norm2d) variants.
namespace anvil::kernels {
void register_pool_onednn();
void register_batch_norm_onednn();
}  // namespace anvil::kernels
