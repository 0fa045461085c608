// SPDX-License-Identifier: Apache-2.0
#pragma once
// Launcher of the `cuda.custom.elementwise` kernels (elementwise_kernels.cu): plain pointers
// and strides, C++17-clean, so that the C++20 registration (pointwise_register.cpp) adapts the
// table's ElementwiseArgs to it. Enqueued on `stream`, not waited for.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/dispatch/ew_op.h"

namespace anvil::cuda {

struct EwLaunch {
  EwOp op = EwOp::add;
  DType dtype = DType::f32;
  const std::int64_t* sizes = nullptr;  // output shape, ndim dims (operands broadcast to it)
  int ndim = 0;
  void* out = nullptr;
  const std::int64_t* out_strides = nullptr;
  const void* a = nullptr;
  const std::int64_t* a_strides = nullptr;
  const void* b = nullptr;                  // null for unary ops
  const std::int64_t* b_strides = nullptr;  // null for unary ops
  double scalar = 0.0;                      // s of the scalar ops
  double alpha = 1.0;                       // add/sub: a +- alpha * b
};

// out = op(a[, b]) over the output shape. Throws anvil::Error for an op the dtype does not
// define (integer dtypes: neg, abs, sign, add, sub, mul, maximum, gt, add_scalar, mul_scalar).
void elementwise(cudaStream_t stream, const EwLaunch& launch);

}  // namespace anvil::cuda
