// SPDX-License-Identifier: Apache-2.0
// The CPU caching allocator: 64-byte aligned blocks, large ones cached for reuse
// (Note [CPU block cache] in allocator.h), the largest on transparent huge pages
// (Note [CPU huge pages] there).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "engine/core/allocator.h"
#include "engine/core/error.h"

namespace anvil {
namespace {

std::size_t round_up(std::size_t n, std::size_t m) { return (n + m - 1) / m * m; }

#if defined(__linux__) && defined(MADV_HUGEPAGE)
constexpr bool kHugePagesBuilt = true;
constexpr std::size_t kHugePage = 2u << 20;

// `bytes` (a multiple of 4 KiB) of fresh anonymous memory starting on a 2 MiB boundary, marked
// for transparent huge pages; nullptr when the kernel refuses the mapping.
void* map_huge(std::size_t bytes) {
  const std::size_t span = bytes + kHugePage;  // room to slide the start onto a boundary
  void* base = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  const std::uintptr_t start = round_up(b, kHugePage);
  if (start > b) munmap(base, start - b);
  const std::uintptr_t end = start + bytes, span_end = b + span;
  if (span_end > end) munmap(reinterpret_cast<void*>(end), span_end - end);
  // Advice only: where THP is off or "never", the block simply stays on 4 KiB pages.
  madvise(reinterpret_cast<void*>(start), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(start);
}
void unmap_huge(void* p, std::size_t bytes) { munmap(p, bytes); }
#else
constexpr bool kHugePagesBuilt = false;
void* map_huge(std::size_t) { return nullptr; }
void unmap_huge(void*, std::size_t) {}
#endif

// True unless the environment variable is "0". std::getenv directly, not config.h's
// env_or_empty: the allocator is the bottom of engine/core and also links alone (scripts/fuzz.sh).
bool env_not_zero(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

// ANVIL_CPU_HUGE_PAGES=0 keeps every block on malloc's pages (to measure what huge pages bring).
bool huge_pages_wanted() { return kHugePagesBuilt && env_not_zero("ANVIL_CPU_HUGE_PAGES"); }

class CpuCachingAllocator final : public Allocator {
 public:
  ~CpuCachingAllocator() override { empty_cache(); }

  void* allocate(std::size_t bytes) override {
    if (bytes == 0) return nullptr;
    const std::size_t size = block_size(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.allocations;
    if (size >= kCpuCacheMinBytes) {
      // Best fit among cached blocks no more than 1/8 larger than the request.
      auto it = free_.lower_bound(size);
      if (it != free_.end() && it->first <= size + size / 8) return take_cached(it);
      // A miss that would grow the process past its live high-water mark (Note [CPU cache
      // bound]): a cached block up to twice the request instead, else make room.
      if (bounded_ && over_bound(size)) {
        if (it != free_.end() && it->first <= 2 * size) return take_cached(it);
        trim_locked(size);
      }
    }
    void* p = fresh_block(size);
    if (p == nullptr && cached_bytes_ > 0) {  // out of memory: drop the cache and retry once
      release_cached_locked();
      p = fresh_block(size);
    }
    if (p == nullptr) fail("cpu_allocator.allocate", "out of memory allocating ", bytes, " bytes");
    if (size >= kCpuCacheMinBytes) sizes_[p] = size;
    account_alloc(size);
    return p;
  }

  void deallocate(void* ptr, std::size_t bytes) override {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t size = block_size(bytes);
    if (size >= kCpuCacheMinBytes) {
      auto it = sizes_.find(ptr);
      if (it != sizes_.end()) {  // the block may be larger than asked for (best fit)
        size = it->second;
        sizes_.erase(it);
      }
      stats_.current -= static_cast<std::int64_t>(size);
      free_.emplace(size, ptr);
      cached_bytes_ += size;
      return;
    }
    stats_.current -= static_cast<std::int64_t>(size);
    stats_.reserved -= static_cast<std::int64_t>(size);
    release_block(ptr, size);
  }

  MemoryStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_peak() override {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak = stats_.current;
  }
  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    release_cached_locked();
  }
  Device device() const override { return Device::cpu(); }

 private:
  // Small blocks are rounded to the alignment, large ones to 4 KiB pages so that
  // equal-sized requests land on equal cache keys.
  static std::size_t block_size(std::size_t bytes) {
    std::size_t s = round_up(bytes, kCpuAlignment);
    return s >= kCpuCacheMinBytes ? round_up(s, 4096) : s;
  }
  bool on_huge_pages(std::size_t size) const { return huge_pages_ && size >= kCpuHugePageMinBytes; }
  void* fresh_block(std::size_t size) const {
    return on_huge_pages(size) ? map_huge(size) : std::aligned_alloc(kCpuAlignment, size);
  }
  void release_block(void* p, std::size_t size) const {
    if (on_huge_pages(size))
      unmap_huge(p, size);
    else
      std::free(p);
  }
  std::size_t current_bytes() const { return static_cast<std::size_t>(stats_.current); }
  void* take_cached(std::multimap<std::size_t, void*>::iterator it) {
    void* p = it->second;
    const std::size_t got = it->first;
    free_.erase(it);
    cached_bytes_ -= got;
    sizes_[p] = got;
    ++stats_.cache_hits;
    account_alloc(got);
    return p;
  }
  // Would a fresh block of `size` lift live + cached above the live high-water mark + slack?
  // (Note [CPU cache bound]; a live set that grows past the mark is never refused.)
  bool over_bound(std::size_t size) const {
    return current_bytes() + cached_bytes_ + size >
           std::max(live_hwm_ + kCpuCacheSlackBytes, current_bytes() + size);
  }
  // Returns cached blocks, largest first, until a fresh `size` is no longer over the bound (or
  // nothing is cached).
  void trim_locked(std::size_t size) {
    while (!free_.empty() && over_bound(size)) {
      auto last = std::prev(free_.end());
      release_block(last->second, last->first);
      cached_bytes_ -= last->first;
      stats_.reserved -= static_cast<std::int64_t>(last->first);
      free_.erase(last);
    }
  }
  void account_alloc(std::size_t size) {
    stats_.current += static_cast<std::int64_t>(size);
    if (stats_.current > stats_.peak) stats_.peak = stats_.current;
    live_hwm_ = std::max(live_hwm_, current_bytes());
    stats_.reserved = stats_.current + static_cast<std::int64_t>(cached_bytes_);
  }
  void release_cached_locked() {
    for (auto& [size, p] : free_) release_block(p, size);
    free_.clear();
    cached_bytes_ = 0;
    stats_.reserved = stats_.current;
    live_hwm_ = current_bytes();  // a new workload (a new model) sets its own bound
  }

  const bool bounded_ = env_not_zero("ANVIL_CPU_CACHE_BOUND");  // Note [CPU cache bound]
  const bool huge_pages_ = huge_pages_wanted();  // fixed for the process: blocks must be freed
                                                 // the way they were obtained
  mutable std::mutex mu_;
  std::multimap<std::size_t, void*> free_;  // cached free blocks by size
  std::map<void*, std::size_t> sizes_;      // live large blocks -> their real size
  std::size_t cached_bytes_ = 0;
  std::size_t live_hwm_ = 0;  // most bytes live at once since the last empty_cache()
  MemoryStats stats_;
};

}  // namespace

Allocator& cpu_allocator() {
  // Leaked on purpose: tensors in static objects may be freed after main() returns.
  static auto* alloc = new CpuCachingAllocator();
  return *alloc;
}

MemoryStats memory_stats(Device device) { return allocator_for(device).stats(); }
void reset_peak_memory(Device device) { allocator_for(device).reset_peak(); }
void empty_cache(Device device) { allocator_for(device).empty_cache(); }

}  // namespace anvil
