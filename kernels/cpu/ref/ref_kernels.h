// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration entry points of the reference (`ref`) kernels.
namespace anvil::kernels {
void register_gemm_ref();
void register_elementwise_ref();
void register_pool_ref();        // max_pool2d, avg_pool2d, adaptive_avg_pool2d
void register_batch_norm_ref();  // batch_norm2d
void register_reduce_ref();      // reduce (sum, max)
void register_softmax_ref();     // softmax family and cross-entropy
}  // namespace anvil::kernels
