// SPDX-License-Identifier: Apache-2.0
// register_cuda_kernels(): the one place that knows every CUDA kernel family.
#include "kernels/cuda/register.h"

#include <mutex>

namespace anvil::cuda {

void register_cuda_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_cuda_gemm();
    register_cuda_pointwise();
    register_cuda_training();
    register_cuda_pool();
    register_cuda_batch_norm();
    register_cuda_conv();
    register_cuda_conv_im2col();
    register_cuda_embedding();
    register_cuda_lstm();
    register_cuda_lstm_cudnn();
  });
}

}  // namespace anvil::cuda
