// SPDX-License-Identifier: Apache-2.0
#pragma once
// ANVIL_CUDA_CHECK(call): turns a CUDA runtime status into an anvil::Error that carries the call
// text and file:line (DESIGN.md, Errors). Only kernels/cuda/** includes this (and CUDA headers).
// C++17-clean so that .cu files (compiled as C++17, see CMakeLists.txt) can use it too.
#include <cuda_runtime_api.h>

#include <cstring>

#include "engine/core/error.h"

namespace anvil::cuda {

// "kernels/cuda/x.cpp" rather than the absolute path of the build machine.
inline const char* short_path(const char* file) {
  const char* p = std::strstr(file, "kernels/cuda/");
  return p != nullptr ? p : file;
}

// Text of a status: "cudaErrorMemoryAllocation (out of memory)".
inline std::string status_text(cudaError_t status) {
  return detail::str_cat(cudaGetErrorName(status), " (", cudaGetErrorString(status), ")");
}

[[noreturn]] inline void throw_status(cudaError_t status, const char* call, const char* file,
                                      int line) {
  // Clears the runtime's "last error" so that the next, unrelated check does not report it
  // again (sticky errors such as an illegal address stay regardless: the context is lost).
  (void)cudaGetLastError();
  throw Error(detail::str_cat("cuda: ", call, " failed with ", status_text(status), " at ",
                              short_path(file), ":", line));
}

inline void check_status(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) throw_status(status, call, file, line);
}

}  // namespace anvil::cuda

#define ANVIL_CUDA_CHECK(call) ::anvil::cuda::check_status((call), #call, __FILE__, __LINE__)
