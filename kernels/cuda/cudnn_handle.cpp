// SPDX-License-Identifier: Apache-2.0
// Per-device cuDNN handles bound to anvil's streams, and cuDNN status conversion
// (cudnn_handle.h). No kernels here.
#include "kernels/cuda/cudnn_handle.h"

#include <map>
#include <mutex>

#include "engine/core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_guard.h"

namespace anvil::cuda {

std::string cudnn_status_text(cudnnStatus_t status) { return cudnnGetErrorString(status); }

void throw_cudnn_status(cudnnStatus_t status, const char* call, const char* file, int line) {
  (void)cudaGetLastError();  // as for cuBLAS: do not let a later ANVIL_CUDA_CHECK report it
  throw Error(detail::str_cat("cudnn: ", call, " failed with ", cudnn_status_text(status), " at ",
                              short_path(file), ":", line));
}

cudnnHandle_t cudnn_handle(int device) {
  // Same scheme as cublas_handle(): a map under one mutex, handles leaked on purpose.
  static std::mutex mu;
  static auto* handles = new std::map<int, cudnnHandle_t>();
  cudaStream_t s = stream(device);  // validates the device; takes its own lock
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = handles->find(device); it != handles->end()) return it->second;
  DeviceGuard guard(device);  // cudnnCreate binds the handle to the current device
  cudnnHandle_t h = nullptr;
  ANVIL_CUDNN_CHECK(cudnnCreate(&h));
  try {
    ANVIL_CUDNN_CHECK(cudnnSetStream(h, s));
  } catch (...) {
    (void)cudnnDestroy(h);
    throw;
  }
  handles->emplace(device, h);
  return h;
}

}  // namespace anvil::cuda
