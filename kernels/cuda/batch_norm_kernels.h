// SPDX-License-Identifier: Apache-2.0
#pragma once
// Launchers of the `cuda.custom` batch-norm kernels (batch_norm_kernels.cu) over dense NCHW
// x [N, C, HW] and per-channel vectors [C], f32/f64, with ref's formulas
// (kernels/cpu/ref/batch_norm_ref.cpp): statistics in two passes in double, the normalisation
// and the gradient evaluated in double from the T-rounded mean and variance. Also two [C]
// helpers of the cuda.cudnn variant. C++17-clean; enqueued on `stream`, not waited for; nothing
// is launched for empty tensors.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "kernels/cuda/batch_norm_element.h"  // BnGeometry

namespace anvil::cuda {

// mean[c] = sum x / M, var[c] = sum (x - mean)^2 / M (biased), M = N*HW.
void bn_stats(cudaStream_t stream, DType dtype, const BnGeometry& g, const void* x, void* mean,
              void* var);

// y = (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c].
void bn_normalize(cudaStream_t stream, DType dtype, const BnGeometry& g, const void* x, void* y,
                  const void* weight, const void* bias, const void* mean, const void* var);

// dbias[c] = sum dy, dweight[c] = sum dy * xhat, and dx (batch statistics: through the mean and
// variance; otherwise dy * weight * invstd). scratch: 2*C doubles of device memory (the sums in
// double, as ref uses them for dx).
void bn_backward(cudaStream_t stream, DType dtype, const BnGeometry& g, const void* x,
                 const void* dy, const void* weight, const void* mean, const void* var, void* dx,
                 void* dweight, void* dbias, double* scratch, bool batch_stats);

// v[i] *= factor for i < count (cuda.cudnn: unbiased -> biased variance).
void bn_scale_vector(cudaStream_t stream, DType dtype, void* v, std::int64_t count, double factor);
// invstd[i] = 1 / sqrt(var[i] + eps) (cuda.cudnn: cuDNN's "saved inverse variance").
void bn_inv_std(cudaStream_t stream, DType dtype, const void* var, void* invstd, std::int64_t count,
                double eps);

}  // namespace anvil::cuda
