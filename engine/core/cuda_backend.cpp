// SPDX-License-Identifier: Apache-2.0
// Loads libanvil_cuda.so on first GPU use (Note [Lazy CUDA loading] in cuda_backend.h).
#include "engine/core/cuda_backend.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "engine/core/config.h"
#include "engine/core/error.h"

namespace anvil {
namespace {

struct LoadResult {
  CudaBackend* backend = nullptr;
  std::string reason;
};

// The directory holding libanvil itself: the backend library is installed beside it.
std::string own_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_directory), &info) == 0 || info.dli_fname == nullptr)
    return {};
  const std::string path = info.dli_fname;
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

LoadResult load() {
  std::string path = env_or_empty("ANVIL_CUDA_LIBRARY");
  if (path.empty()) path = own_directory() + "libanvil_cuda.so";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return {nullptr, "CUDA backend library not loadable (" + path + "): " + (err ? err : "?")};
  }
  using Entry = CudaBackend* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kCudaBackendEntry));
  if (entry == nullptr) return {nullptr, path + " has no entry point " + kCudaBackendEntry};
  // The handle is never closed: kernels registered by the backend live in its code.
  try {
    CudaBackend* b = entry();
    if (b == nullptr) return {nullptr, "CUDA backend returned no instance"};
    if (b->device_count() <= 0) return {nullptr, "no CUDA device: " + b->version()};
    return {b, {}};
  } catch (const std::exception& e) {
    return {nullptr, std::string("CUDA backend failed to start: ") + e.what()};
  }
}

const LoadResult& loaded() {
  static const LoadResult r = load();  // thread-safe, once
  return r;
}

}  // namespace

CudaBackend* cuda_backend() { return loaded().backend; }
bool cuda_available() { return cuda_backend() != nullptr; }
std::string cuda_unavailable_reason() { return loaded().reason; }

CudaBackend& require_cuda(const char* where) {
  CudaBackend* b = cuda_backend();
  ANVIL_CHECK(b != nullptr, where, "CUDA is not available: ", cuda_unavailable_reason());
  return *b;
}

}  // namespace anvil
