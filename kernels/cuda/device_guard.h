// SPDX-License-Identifier: Apache-2.0
#pragma once
// DeviceGuard: makes `device` the calling thread's current CUDA device for a scope and restores
// the previous one afterwards, so that the backend's work on cuda:1 does not move a user's
// thread off cuda:0. C++17-clean (usable from .cu files).
#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_check.h"

namespace anvil::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    ANVIL_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device)
      ANVIL_CUDA_CHECK(cudaSetDevice(device));
    else
      previous_ = -1;  // nothing to restore
  }
  ~DeviceGuard() {
    // A destructor must not throw; a failure here leaves the other device current, which the
    // next guarded call corrects anyway.
    if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace anvil::cuda
