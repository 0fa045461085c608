// SPDX-License-Identifier: Apache-2.0
#pragma once
// The caching device allocator of one CUDA device (one instance per device, owned by the
// backend). See Note [CUDA block cache].
//
// Note [CUDA block cache]
// cudaMalloc and cudaFree are slow (tens of microseconds to milliseconds) and cudaFree
// synchronises the whole device, so a training step must not call them per tensor. Requests are
// rounded up to a bin (512 B steps up to 1 MiB, then 8 bins per power of two, so at most 1/8 is
// wasted); freed blocks go to a size-keyed free list and serve later requests of the same bin or
// of one bin smaller. Reuse is safe without events because every anvil kernel and copy on a
// device runs on that device's single stream (cuda_context.h): work queued before the free is
// ordered before any use by the next owner. A kernel on another stream would need an event.
// When cudaMalloc reports out-of-memory, the cache is released and the call retried once; a
// second failure throws anvil::Error naming the size, and the allocator stays usable.
#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

#include "engine/core/allocator.h"

namespace anvil::cuda {

class CudaCachingAllocator final : public Allocator {
 public:
  explicit CudaCachingAllocator(int device) : device_(device) {}
  // Never calls cudaFree: the allocator lives until process exit, when the CUDA runtime may
  // already be torn down (the backend leaks it on purpose).
  ~CudaCachingAllocator() override = default;

  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  MemoryStats stats() const override;
  void reset_peak() override;
  void empty_cache() override;
  Device device() const override { return Device::cuda(device_); }

  // The bin a request of `bytes` is rounded to (exposed for tests and benchmarks).
  static std::size_t bin_size(std::size_t bytes);

 private:
  void release_cached_locked();  // cudaFree every cached block; mu_ held
  void account_alloc_locked(std::size_t size);

  const int device_;
  mutable std::mutex mu_;
  std::multimap<std::size_t, void*> free_;       // cached free blocks by block size
  std::unordered_map<void*, std::size_t> live_;  // blocks handed out -> block size
  std::size_t cached_bytes_ = 0;
  MemoryStats stats_;
};

}  // namespace anvil::cuda
