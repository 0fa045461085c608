// SPDX-License-Identifier: Apache-2.0
// An empty kernel launched once per device (cuda_context.h: launch_probe_kernel) to learn
// whether the compiled architectures (CMAKE_CUDA_ARCHITECTURES) can run on that GPU.
// Variants: none. Layout: none.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_context.h"

namespace anvil::cuda {
namespace {
__global__ void probe_kernel() {}
}  // namespace

cudaError_t launch_probe_kernel(cudaStream_t stream) {
  probe_kernel<<<1, 1, 0, stream>>>();
  const cudaError_t status = cudaGetLastError();  // launch errors are reported here
  if (status != cudaSuccess) return status;
  return cudaStreamSynchronize(stream);
}

}  // namespace anvil::cuda
