// The CPU caching allocator: 64-byte aligned blocks, large ones cached for reuse
// (Note [CPU block cache] in allocator.h).
#include <cstdlib>
#include <map>
#include <mutex>

#include "engine/core/allocator.h"
#include "engine/core/error.h"

namespace anvil {
namespace {

std::size_t round_up(std::size_t n, std::size_t m) { return (n + m - 1) / m * m; }

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
      if (it != free_.end() && it->first <= size + size / 8) {
        void* p = it->second;
        const std::size_t got = it->first;
        free_.erase(it);
        cached_bytes_ -= got;
        sizes_[p] = got;
        ++stats_.cache_hits;
        account_alloc(got);
        return p;
      }
    }
    void* p = std::aligned_alloc(kCpuAlignment, size);
    if (p == nullptr && cached_bytes_ > 0) {  // out of memory: drop the cache and retry once
      release_cached_locked();
      p = std::aligned_alloc(kCpuAlignment, size);
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
    std::free(ptr);
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
  void account_alloc(std::size_t size) {
    stats_.current += static_cast<std::int64_t>(size);
    if (stats_.current > stats_.peak) stats_.peak = stats_.current;
    stats_.reserved = stats_.current + static_cast<std::int64_t>(cached_bytes_);
  }
  void release_cached_locked() {
    for (auto& [size, p] : free_) std::free(p);
    free_.clear();
    cached_bytes_ = 0;
    stats_.reserved = stats_.current;
  }

  mutable std::mutex mu_;
  std::multimap<std::size_t, void*> free_;  // cached free blocks by size
  std::map<void*, std::size_t> sizes_;      // live large blocks -> their real size
  std::size_t cached_bytes_ = 0;
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
