// SPDX-License-Identifier: Apache-2.0
// Per-device cuBLAS handles bound to anvil's streams, and cuBLAS status conversion
// (cublas_handle.h). No kernels here.
#include "kernels/cuda/cublas_handle.h"

#include <map>
#include <mutex>

#include "engine/core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_guard.h"

namespace anvil::cuda {

std::string cublas_status_text(cublasStatus_t status) {
  return detail::str_cat(cublasGetStatusName(status), " (", cublasGetStatusString(status), ")");
}

void throw_cublas_status(cublasStatus_t status, const char* call, const char* file, int line) {
  // A failed launch inside cuBLAS can leave a (non-sticky) runtime error behind; clear it so
  // that the next, unrelated ANVIL_CUDA_CHECK does not report it again.
  (void)cudaGetLastError();
  throw Error(detail::str_cat("cublas: ", call, " failed with ", cublas_status_text(status), " at ",
                              short_path(file), ":", line));
}

cublasHandle_t cublas_handle(int device) {
  // A map under one mutex rather than a fixed array: the device count is known only at run
  // time, and the lock costs tens of nanoseconds against a GEMM's microseconds at least.
  static std::mutex mu;
  static auto* handles = new std::map<int, cublasHandle_t>();  // leaked on purpose (see header)
  // stream() validates the device and creates the stream outside our lock (it takes its own).
  cudaStream_t s = stream(device);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = handles->find(device); it != handles->end()) return it->second;
  DeviceGuard guard(device);  // cublasCreate binds the handle to the current device
  cublasHandle_t h = nullptr;
  ANVIL_CUBLAS_CHECK(cublasCreate(&h));
  // Bound once and never changed, so that concurrent calls through the handle from several
  // host threads never race on its stream (cuBLAS allows sharing a handle between threads as
  // long as its configuration is not changed concurrently).
  try {
    ANVIL_CUBLAS_CHECK(cublasSetStream(h, s));
  } catch (...) {
    (void)cublasDestroy(h);
    throw;
  }
  handles->emplace(device, h);
  return h;
}

}  // namespace anvil::cuda
