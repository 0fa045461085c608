// SPDX-License-Identifier: Apache-2.0
#pragma once
// One cuBLAS handle per device, created on first use and bound to the device's anvil stream
// (cuda_context.h), and ANVIL_CUBLAS_CHECK(call), which turns a cuBLAS status into an
// anvil::Error carrying the call text, file:line and cuBLAS's own name and text for the status
// (DESIGN.md, Errors). Only kernels/cuda/** includes this.
#include <cublas_v2.h>

#include <string>

namespace anvil::cuda {

// The handle of `device` (thread-safe). Created with `device` current and bound to
// stream(device) with cublasSetStream, once; never rebound, never destroyed (like the streams:
// the CUDA runtime may be gone when static destructors run). Every cuBLAS call through it must
// run with `device` current (DeviceGuard). Throws anvil::Error when creation fails.
cublasHandle_t cublas_handle(int device);

// "CUBLAS_STATUS_INVALID_VALUE (an invalid numeric value was used as an argument)".
std::string cublas_status_text(cublasStatus_t status);

[[noreturn]] void throw_cublas_status(cublasStatus_t status, const char* call, const char* file,
                                      int line);

inline void check_cublas_status(cublasStatus_t status, const char* call, const char* file,
                                int line) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_cublas_status(status, call, file, line);
}

}  // namespace anvil::cuda

#define ANVIL_CUBLAS_CHECK(call) \
  ::anvil::cuda::check_cublas_status((call), #call, __FILE__, __LINE__)
