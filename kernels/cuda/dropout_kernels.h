// SPDX-License-Identifier: Apache-2.0
#pragma once
// Launcher of the dropout kernel (dropout_kernels.cu), variant cuda.custom.dropout:
// y = x * mask, mask = keep ? scale : 0, keep drawn from Philox4x32-10 (seed, offset) as in
// Note [Dropout counter RNG] (engine/dispatch/dropout_problem.h), so the host `ref` variant
// reproduces the mask exactly. Dense buffers of n elements; enqueued on `stream`, not waited for.
// C++17-clean (usable from .cu files).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/core/dtype.h"

namespace anvil::cuda {

// keep_threshold: dropout_keep_threshold(p) in [1, 2^32]; scale = 1 / (1 - p).
void dropout_forward(cudaStream_t stream, DType dtype, const void* x, void* y, void* mask,
                     std::int64_t n, std::uint64_t seed, std::uint64_t offset,
                     std::uint64_t keep_threshold, double scale);

}  // namespace anvil::cuda
