// SPDX-License-Identifier: Apache-2.0
#pragma once
// Small cuDNN helpers of the pooling and batch-norm variants (pool_cudnn.cpp,
// batch_norm_cudnn.cpp): an owning 4-D tensor descriptor (packed NCHW), the cuDNN data type of
// an anvil dtype, and the host-side alpha/beta scalars, whose width follows the data type
// (cuDNN reads double scalars for CUDNN_DATA_DOUBLE tensors, float ones otherwise).
#include <cudnn.h>

#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "kernels/cuda/cudnn_handle.h"

namespace anvil::cuda {

inline cudnnDataType_t cudnn_data_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return CUDNN_DATA_FLOAT;
    case DType::f64:
      return CUDNN_DATA_DOUBLE;
    default:
      fail("cudnn_data_type", "no cuDNN pooling/batch-norm type for ", dtype_name(dtype));
  }
}

// Owns a cudnnTensorDescriptor_t.
class TensorDesc {
 public:
  TensorDesc() { ANVIL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_)); }
  ~TensorDesc() { (void)cudnnDestroyTensorDescriptor(d_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  // Packed NCHW: strides (C*H*W, H*W, W, 1).
  void set_nchw(cudnnDataType_t dt, int n, int c, int h, int w) {
    ANVIL_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d_, CUDNN_TENSOR_NCHW, dt, n, c, h, w));
  }
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

// alpha = 1 and beta = 0 as cuDNN reads them for `dtype`: "output = alpha * result + beta *
// output", so beta = 0 overwrites the output without reading it.
class ScalingFactors {
 public:
  explicit ScalingFactors(DType dtype) : is_double_(dtype == DType::f64) {}
  const void* one() const { return is_double_ ? static_cast<const void*>(&d1_) : &f1_; }
  const void* zero() const { return is_double_ ? static_cast<const void*>(&d0_) : &f0_; }

 private:
  bool is_double_;
  float f1_ = 1.0f, f0_ = 0.0f;
  double d1_ = 1.0, d0_ = 0.0;
};

}  // namespace anvil::cuda
