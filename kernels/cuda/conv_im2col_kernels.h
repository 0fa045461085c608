// SPDX-License-Identifier: Apache-2.0
#pragma once
// C++17 launchers of the cuda.custom.im2col conv2d kernels (conv_im2col_kernels.cu); the GEMMs
// and the pass logic are in conv_im2col.cpp. NCHW data, one sample and one group per im2col /
// col2im call: col is [Cg * R * S, P * Q], row (c * R + r) * S + s, column p * Q + q.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "kernels/cuda/conv_im2col_index.h"  // Im2colGeometry

namespace anvil::cuda {

// col = im2col(x) for x [Cg, H, W] (zeros where the filter reads padding).
void im2col(cudaStream_t stream, DType dtype, const void* x, void* col, const Im2colGeometry& g);
// dx [Cg, H, W] = the sum of col's entries that read each input element (gather, no atomics:
// deterministic).
void col2im(cudaStream_t stream, DType dtype, const void* col, void* dx, const Im2colGeometry& g);
// y [N, K, PQ] += b[k] (when b is not null), then y = max(y, 0) when relu.
void bias_relu(cudaStream_t stream, DType dtype, void* y, const void* b, std::int64_t n,
               std::int64_t k, std::int64_t pq, bool relu);
// db[k] = sum over n and pq of dy [N, K, PQ] (one block per k, accumulated in double).
void bias_grad(cudaStream_t stream, DType dtype, const void* dy, void* db, std::int64_t n,
               std::int64_t k, std::int64_t pq);

}  // namespace anvil::cuda
