// SPDX-License-Identifier: Apache-2.0
#pragma once
// One cuDNN handle per device, created on first use and bound to the device's anvil stream
// (cuda_context.h), and ANVIL_CUDNN_CHECK(call), which turns a cuDNN status into an
// anvil::Error carrying the call text, file:line and cuDNN's own text for the status (DESIGN.md,
// Errors). The twin of cublas_handle.h; only kernels/cuda/** includes this. cuDNN itself is
// linked into libanvil_cuda.so, so a CPU run never loads it (Note [Lazy CUDA loading]).
#include <cudnn.h>

#include <string>

namespace anvil::cuda {

// The handle of `device` (thread-safe). Created with `device` current and bound to
// stream(device) with cudnnSetStream, once; never rebound, never destroyed (the CUDA runtime may
// be gone when static destructors run). Every cuDNN call through it must run with `device`
// current (DeviceGuard). Throws anvil::Error when creation fails (for example when the cuDNN
// library found at run time is older than the headers it was built with).
cudnnHandle_t cudnn_handle(int device);

// "CUDNN_STATUS_NOT_SUPPORTED".
std::string cudnn_status_text(cudnnStatus_t status);

[[noreturn]] void throw_cudnn_status(cudnnStatus_t status, const char* call, const char* file,
                                     int line);

inline void check_cudnn_status(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status != CUDNN_STATUS_SUCCESS) throw_cudnn_status(status, call, file, line);
}

}  // namespace anvil::cuda

#define ANVIL_CUDNN_CHECK(call) ::anvil::cuda::check_cudnn_status((call), #call, __FILE__, __LINE__)
