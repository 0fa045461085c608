// SPDX-License-Identifier: Apache-2.0
#pragma once
// PinnedHostAllocator: page-locked host memory (cudaHostAlloc, portable to every device) for
// batches that are copied to a GPU asynchronously (Note [Pinned batches] in data/loader.h).
// cudaHostAlloc and cudaFreeHost are slow and cudaFreeHost waits for the device, so freed
// blocks are kept in a cache keyed by exact size and handed out again; empty_cache() frees them.
// Its tensors are CPU tensors (device() is cpu): everything on the host reads them as usual.
#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

#include "engine/core/allocator.h"

namespace anvil::cuda {

class PinnedHostAllocator final : public Allocator {
 public:
  PinnedHostAllocator() = default;
  ~PinnedHostAllocator() override = default;  // leaked with the backend (no CUDA at exit)

  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  MemoryStats stats() const override;
  void reset_peak() override;
  void empty_cache() override;
  Device device() const override { return Device::cpu(); }

 private:
  mutable std::mutex mu_;
  std::multimap<std::size_t, void*> free_;  // cached blocks by (rounded) size
  std::unordered_map<void*, std::size_t> live_;
  std::size_t cached_bytes_ = 0;
  MemoryStats stats_;
};

}  // namespace anvil::cuda
