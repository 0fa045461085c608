// SPDX-License-Identifier: Apache-2.0
#pragma once
// Launchers of the `cuda.custom.reduce` kernels (reduce_kernels.cu) over a contiguous
// x[outer, reduce, inner] into out[outer, inner]; f32/f64. C++17-clean; enqueued on `stream`,
// not waited for.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/core/dtype.h"

namespace anvil::cuda {

// out[o, i] = scale * sum_r x[o, r, i] (accumulated in double).
void reduce_sum(cudaStream_t stream, DType dtype, const void* x, void* out, std::int64_t outer,
                std::int64_t reduce, std::int64_t inner, double scale);
// out[o, i] = max_r x[o, r, i], index[o, i] = its r: the first maximum, or the first NaN.
// reduce must be > 0.
void reduce_max(cudaStream_t stream, DType dtype, const void* x, void* out, std::int64_t* index,
                std::int64_t outer, std::int64_t reduce, std::int64_t inner);

}  // namespace anvil::cuda
