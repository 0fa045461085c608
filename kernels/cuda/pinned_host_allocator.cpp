// SPDX-License-Identifier: Apache-2.0
// PinnedHostAllocator (pinned_host_allocator.h): cudaHostAlloc'd blocks, cached by size.
#include "kernels/cuda/pinned_host_allocator.h"

#include <cuda_runtime_api.h>

#include "engine/core/error.h"
#include "kernels/cuda/cuda_check.h"

namespace anvil::cuda {
namespace {
// 4 KiB granules: batches of one loader have one size, so exact-size reuse is the common case.
std::size_t round_up(std::size_t bytes) { return (bytes + 4095) / 4096 * 4096; }
}  // namespace

void* PinnedHostAllocator::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  const std::size_t size = round_up(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.allocations;
  void* p = nullptr;
  auto it = free_.find(size);
  if (it != free_.end()) {
    p = it->second;
    free_.erase(it);
    cached_bytes_ -= size;
    ++stats_.cache_hits;
  } else {
    const cudaError_t st = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    if (st != cudaSuccess) {
      (void)cudaGetLastError();
      fail("PinnedHostAllocator::allocate", "cudaHostAlloc of ", size, " bytes failed with ",
           status_text(st));
    }
  }
  live_[p] = size;
  stats_.current += static_cast<std::int64_t>(size);
  if (stats_.current > stats_.peak) stats_.peak = stats_.current;
  stats_.reserved = stats_.current + static_cast<std::int64_t>(cached_bytes_);
  return p;
}

void PinnedHostAllocator::deallocate(void* ptr, std::size_t bytes) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  ANVIL_CHECK(it != live_.end(), "PinnedHostAllocator::deallocate", "unknown block ", ptr, " of ",
              bytes, " bytes");
  const std::size_t size = it->second;
  live_.erase(it);
  free_.emplace(size, ptr);
  cached_bytes_ += size;
  stats_.current -= static_cast<std::int64_t>(size);
  stats_.reserved = stats_.current + static_cast<std::int64_t>(cached_bytes_);
}

MemoryStats PinnedHostAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void PinnedHostAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak = stats_.current;
}

void PinnedHostAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [size, p] : free_) (void)cudaFreeHost(p);
  (void)cudaGetLastError();
  free_.clear();
  cached_bytes_ = 0;
  stats_.reserved = stats_.current;
}

}  // namespace anvil::cuda
