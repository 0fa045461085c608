// SPDX-License-Identifier: Apache-2.0
#pragma once
// Memory: the allocator interface, per-device byte counters and the CPU caching allocator.
//
// Note [CPU block cache]
// glibc serves big blocks with mmap and returns them to the kernel on free, so a training step
// that frees and re-allocates its 100 MB activation and gradient buffers every iteration pays
// for faulting every page in again (about 0.25 ms per MB here). The CPU allocator therefore keeps
// freed blocks of at least kCpuCacheMinBytes in a size-keyed free list and hands them out again
// to requests of the same rounded size (a block may be up to 1/8 larger than asked for).
// Small blocks go straight to aligned_alloc/free. empty_cache() returns the cached blocks.
//
// Note [CPU cache bound]
// Caching by size alone holds, for every size, as many blocks as were ever live at once, and
// different sizes peak at different moments of a step: VGG16 at batch 16 kept 3.7 GB reserved
// for 2.6 GB of live tensors. So a miss that would lift live + cached + the new block above the
// most bytes ever live at once (since the last empty_cache()) plus kCpuCacheSlackBytes first
// takes a cached block up to twice the request, and otherwise returns cached blocks, largest
// first, until the new block fits. The price is re-faulting returned blocks when their size
// comes back. Without the slack that cost LSTM-64's training step 20 % (1.95 -> 2.35 s, for 80 MB
// less); with 128 MiB it costs nothing measurable there and VGG16 still drops from 4585 to
// 3605 MB peak RSS (its step: about 5 % slower, 6.65 -> 7.0 s, 1 thread).
// ANVIL_CPU_CACHE_BOUND=0 turns the bound off.
//
// Note [CPU huge pages]
// Blocks of at least kCpuHugePageMinBytes are mapped with mmap at a 2 MiB boundary and advised
// MADV_HUGEPAGE, so that Linux backs them with transparent huge pages where it can (THP
// "madvise" or "always"): one fault per 2 MiB instead of 512, and fewer TLB misses on the big
// activations and weights. Touching 2 GiB of fresh pages took 0.85-1.2 s on 4 KiB pages and
// 0.2-0.5 s with MADV_HUGEPAGE on the development VM (once the VM had the memory); that is what
// the first step of every model and every cache miss pays. ANVIL_CPU_HUGE_PAGES=0 turns this
// off; elsewhere than Linux it is off.
#include <cstddef>
#include <cstdint>

#include "engine/core/device.h"

namespace anvil {

// Bytes per device. `current` and `peak` count blocks handed out to tensors; `reserved`
// counts those plus the cached free blocks (what the process actually holds).
struct MemoryStats {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t reserved = 0;
  std::int64_t allocations = 0;  // number of allocate() calls
  std::int64_t cache_hits = 0;   // of which served from the block cache
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns a block of at least `bytes` bytes, 64-byte aligned; throws anvil::Error when
  // memory is exhausted. allocate(0) returns nullptr.
  virtual void* allocate(std::size_t bytes) = 0;
  // Gives back a block from allocate() with the same `bytes`.
  virtual void deallocate(void* ptr, std::size_t bytes) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak() = 0;
  // Releases cached free blocks to the system.
  virtual void empty_cache() = 0;
  virtual Device device() const = 0;
};

inline constexpr std::size_t kCpuAlignment = 64;
inline constexpr std::size_t kCpuCacheMinBytes = 256 * 1024;
inline constexpr std::size_t kCpuHugePageMinBytes = 2 * 1024 * 1024;
inline constexpr std::size_t kCpuCacheSlackBytes = 128 * 1024 * 1024;

// The process-wide CPU allocator (caching, see Note [CPU block cache]).
Allocator& cpu_allocator();

// The allocator of any device; CUDA loads the CUDA backend on first use.
Allocator& allocator_for(Device device);

// Shorthands over allocator_for(device).
MemoryStats memory_stats(Device device = Device::cpu());
void reset_peak_memory(Device device = Device::cpu());
void empty_cache(Device device = Device::cpu());

}  // namespace anvil
