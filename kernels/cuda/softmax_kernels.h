// SPDX-License-Identifier: Apache-2.0
#pragma once
// Launchers of the `cuda.custom.softmax` kernels (softmax_kernels.cu): row-wise softmax /
// log-softmax of dense x[rows, cols], their backward, and the fused softmax cross-entropy
// (semantics of engine/dispatch/softmax_problem.h); f32/f64 values, i32/i64 class ids.
// C++17-clean; enqueued on `stream` and never waited for (Note [Host waits in a step]).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "kernels/cuda/host_waits.h"

namespace anvil::cuda {

void softmax_rows(cudaStream_t stream, DType dtype, const void* x, void* y, std::int64_t rows,
                  std::int64_t cols, bool log);
// softmax: dx = y * (dy - <dy, y>); log-softmax: dx = dy - exp(y) * sum(dy).
void softmax_backward_rows(cudaStream_t stream, DType dtype, const void* y, const void* dy,
                           void* dx, std::int64_t rows, std::int64_t cols, bool log);
// loss[r] = lse[r] - x[r, t_r], lse[r] = log sum_c exp(x[r, c]). `flag` is device scratch of
// 8 bytes. Class ids out of [0, cols) are detected on the device (their loss is NaN); the first
// bad row of the call and its id go to `record` (the device's DeviceErrorRecord), and the host
// throws the anvil::Error naming them, as the CPU does, at its next wait for the device
// (raise_device_error). The call itself never waits.
void cross_entropy_forward(cudaStream_t stream, DType dtype, DType index_dtype, const void* x,
                           const void* target, void* loss, void* lse, std::int64_t rows,
                           std::int64_t cols, void* flag, DeviceErrorRecord* record);
// dx[r, c] = s * (exp(x[r, c] - lse[r]) - [c == t_r]) with s = scale, times *scale_device
// (a device scalar of the dtype) when that is not null; an out-of-range id contributes no
// one-hot term (never an out-of-bounds write).
void cross_entropy_backward(cudaStream_t stream, DType dtype, DType index_dtype, const void* x,
                            const void* target, const void* lse, void* dx, std::int64_t rows,
                            std::int64_t cols, double scale, const void* scale_device);

}  // namespace anvil::cuda
