// SPDX-License-Identifier: Apache-2.0
// The caching CUDA device allocator (Note [CUDA block cache] in cuda_allocator.h): bins,
// free-list reuse, per-device byte counters, and out-of-memory recovery.
#include "kernels/cuda/cuda_allocator.h"

#include <cuda_runtime_api.h>

#include "engine/core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_guard.h"

namespace anvil::cuda {
namespace {

constexpr std::size_t kSmallLimit = std::size_t{1} << 20;  // 1 MiB: below, 512 B steps
constexpr std::size_t kSmallStep = 512;
// Larger requests cannot succeed on any GPU and would overflow the rounding below.
constexpr std::size_t kMaxRequest = std::size_t{1} << 56;

std::size_t round_up(std::size_t n, std::size_t m) { return (n + m - 1) / m * m; }

// Largest power of two <= n (n > 0).
std::size_t floor_pow2(std::size_t n) {
  std::size_t p = 1;
  while (p <= n / 2) p *= 2;
  return p;
}

double mib(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

std::size_t CudaCachingAllocator::bin_size(std::size_t bytes) {
  if (bytes <= kSmallLimit) return round_up(bytes, kSmallStep);
  return round_up(bytes, floor_pow2(bytes) / 8);  // 8 bins per octave: <= 12.5 % waste
}

void CudaCachingAllocator::account_alloc_locked(std::size_t size) {
  stats_.current += static_cast<std::int64_t>(size);
  if (stats_.current > stats_.peak) stats_.peak = stats_.current;
  stats_.reserved = stats_.current + static_cast<std::int64_t>(cached_bytes_);
}

void* CudaCachingAllocator::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  const char* where = "cuda_allocator.allocate";
  if (bytes > kMaxRequest)
    fail(where, "out of memory on cuda:", device_, ": cannot allocate ", bytes, " bytes (",
         mib(bytes), " MiB)");
  const std::size_t size = bin_size(bytes);

  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.allocations;
  // Best fit among cached blocks of this bin up to one bin larger (size + 1/8).
  auto it = free_.lower_bound(size);
  if (it != free_.end() && it->first <= size + size / 8) {
    void* p = it->second;
    const std::size_t got = it->first;
    free_.erase(it);
    cached_bytes_ -= got;
    live_.emplace(p, got);
    ++stats_.cache_hits;
    account_alloc_locked(got);
    return p;
  }

  DeviceGuard guard(device_);
  void* p = nullptr;
  cudaError_t status = cudaMalloc(&p, size);
  if (status == cudaErrorMemoryAllocation && !free_.empty()) {
    // The cached blocks may be what is missing: give them back and try once more.
    (void)cudaGetLastError();
    release_cached_locked();
    status = cudaMalloc(&p, size);
  }
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // out-of-memory is not sticky: the device stays usable
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) (void)cudaGetLastError();
    fail(where, "out of memory on cuda:", device_, " allocating ", bytes, " bytes (", mib(bytes),
         " MiB, rounded to ", size, "); anvil holds ",
         mib(static_cast<std::size_t>(stats_.current)), " MiB in tensors; the device has ",
         mib(free_bytes), " MiB free of ", mib(total_bytes), " MiB");
  }
  check_status(status, "cudaMalloc(&p, size)", __FILE__, __LINE__);
  live_.emplace(p, size);
  account_alloc_locked(size);
  return p;
}

void CudaCachingAllocator::deallocate(void* ptr, std::size_t /*bytes*/) {
  // Called from tensor destructors: never throws, never calls CUDA (the block is cached).
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;  // not ours: nothing sensible to do without throwing
  const std::size_t size = it->second;
  live_.erase(it);
  stats_.current -= static_cast<std::int64_t>(size);
  free_.emplace(size, ptr);
  cached_bytes_ += size;
  stats_.reserved = stats_.current + static_cast<std::int64_t>(cached_bytes_);
}

void CudaCachingAllocator::release_cached_locked() {
  if (free_.empty()) return;
  DeviceGuard guard(device_);
  // Take the list first so that a failing cudaFree leaves no dangling entries behind.
  std::multimap<std::size_t, void*> blocks;
  blocks.swap(free_);
  cached_bytes_ = 0;
  stats_.reserved = stats_.current;
  cudaError_t first_error = cudaSuccess;
  for (auto& [size, p] : blocks) {
    const cudaError_t status = cudaFree(p);
    if (status != cudaSuccess && first_error == cudaSuccess) first_error = status;
  }
  check_status(first_error, "cudaFree(cached block)", __FILE__, __LINE__);
}

MemoryStats CudaCachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CudaCachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak = stats_.current;
}

void CudaCachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached_locked();
}

}  // namespace anvil::cuda
