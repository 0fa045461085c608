// SPDX-License-Identifier: Apache-2.0
#pragma once
// Launchers of the fused multi-tensor optimizer kernels (optimizer_kernels.cu): SGD and Adam
// updates, the sum of squares of gradient-norm clipping and the in-place scaling that clips,
// each over a LIST of dense tensors of one dtype in one launch (two for the sum of squares).
// Everything is enqueued on `stream` (the device's anvil stream, under a DeviceGuard held by
// the caller); only multi_tensor_sum_squares waits, to read its result back.
// C++17-clean (usable from .cu files): plain pointers, sizes and cudaStream_t.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/dispatch/optim_tensor.h"

namespace anvil::cuda {

// One tensor of the list: the table's own OptimTensor (state1 = momentum buffer or Adam's m,
// state2 = Adam's v; `first` = SGD's momentum buffer was just created).
using MultiTensorEntry = OptimTensor;

// Bytes of device scratch one call over `count` tensors needs (the pointer/size table and the
// reduction's partial sums). The caller allocates it on the stream's device; it may be reused
// for later work on the same stream as soon as the call returns (stream order).
std::size_t multi_tensor_scratch_bytes(int count);

struct SgdParams {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
};
// decoupled_decay: AdamW (p *= 1 - lr * weight_decay, no L2 term); else Adam's L2 decay.
struct AdamParams {
  double lr, beta1, beta2, eps, weight_decay, c1, c2;
  bool decoupled_decay;
};

// dtype f32 or f64 (throws anvil::Error otherwise). `entries` is host memory, read before the
// call returns.
void multi_tensor_sgd(cudaStream_t stream, DType dtype, const MultiTensorEntry* entries, int count,
                      void* scratch, const SgdParams& params);
void multi_tensor_adam(cudaStream_t stream, DType dtype, const MultiTensorEntry* entries, int count,
                       void* scratch, const AdamParams& params);
// Sum over every entry's grad of grad^2, accumulated in double in a fixed order (deterministic
// for a given list); waits for the stream and returns the value.
double multi_tensor_sum_squares(cudaStream_t stream, DType dtype, const MultiTensorEntry* entries,
                                int count, void* scratch);
// As multi_tensor_sum_squares, but the sum is ADDED to *sum_device (a device double) and
// nothing waits (Note [Host waits in a step], host_waits.h).
void multi_tensor_sum_squares_into(cudaStream_t stream, DType dtype,
                                   const MultiTensorEntry* entries, int count, void* scratch,
                                   double* sum_device);
// Clipping by global norm on the device: grad *= min(1, max_norm / (sqrt(*sum_squares) + 1e-6))
// for every entry (nothing is written when the factor is not below 1), never waits.
void multi_tensor_clip(cudaStream_t stream, DType dtype, const MultiTensorEntry* entries, int count,
                       void* scratch, const double* sum_squares, double max_norm);
// grad *= scale (scale converted to the dtype first) for every entry.
void multi_tensor_scale(cudaStream_t stream, DType dtype, const MultiTensorEntry* entries,
                        int count, void* scratch, double scale);
// The same, and *found_inf (a device float) = 1 when any scaled value is inf or NaN (never
// cleared: loss scaling's unscale-and-check pass, optim::unscale_grads_); never waits.
void multi_tensor_scale_check(cudaStream_t stream, DType dtype, const MultiTensorEntry* entries,
                              int count, void* scratch, double scale, float* found_inf);

}  // namespace anvil::cuda
