// SPDX-License-Identifier: Apache-2.0
#pragma once
// Launchers of `cuda.custom.embedding` (embedding_kernels.cu): the row gather of an embedding
// lookup and its deterministic backward (semantics of engine/dispatch/embedding_problem.h).
// f32/f64 values, i32/i64 ids; enqueued on `stream`, never waited for. C++17-clean.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "engine/core/dtype.h"
#include "kernels/cuda/host_waits.h"

namespace anvil::cuda {

// Bytes of device scratch embedding_forward needs (the first bad position).
std::size_t embedding_forward_scratch_bytes();
// out[r, :] = weight[ids[r], :]. An id outside [0, rows) gives a NaN row, and the first such
// position and its id go to `record` (reported by the host at its next wait for the device).
void embedding_forward(cudaStream_t stream, DType dtype, DType index_dtype, const void* weight,
                       const void* ids, void* out, std::int64_t rows, std::int64_t dim,
                       std::int64_t n, void* scratch, DeviceErrorRecord* record);

// Bytes of device scratch embedding_backward needs for n ids (sort keys, values and CUB's
// temporary storage).
std::size_t embedding_backward_scratch_bytes(std::int64_t n);
// grad (written whole) = the sum, per id, of its rows of dy, added in increasing position order
// (Note [Deterministic embedding backward]); ids outside [0, rows) are skipped.
void embedding_backward(cudaStream_t stream, DType dtype, DType index_dtype, const void* dy,
                        const void* ids, void* grad, std::int64_t rows, std::int64_t dim,
                        std::int64_t n, void* scratch, std::size_t scratch_bytes);

}  // namespace anvil::cuda
