// SPDX-License-Identifier: Apache-2.0
#pragma once
// Strided copy (with dtype conversion) and fill of device memory, for Tensor::copy_ and
// Tensor::fill_ on CUDA tensors (CudaBackend::copy_on_device / fill_on_device). Enqueued on
// `stream`, not waited for. C++17-clean (usable from .cu files).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/core/dtype.h"

namespace anvil::cuda {

struct DeviceOperand {
  void* data = nullptr;                   // first element
  const std::int64_t* strides = nullptr;  // in elements, one per dim of `sizes`
  DType dtype = DType::f32;
};

// dst[i] = convert(src[i]) for every index i of `sizes` (ndim dims, ndim <= 8).
void strided_copy(cudaStream_t stream, const std::int64_t* sizes, int ndim, DeviceOperand dst,
                  DeviceOperand src);
// dst[i] = value converted to dst.dtype for every index i of `sizes`.
void strided_fill(cudaStream_t stream, const std::int64_t* sizes, int ndim, DeviceOperand dst,
                  double value);

}  // namespace anvil::cuda
