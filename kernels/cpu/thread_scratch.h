// SPDX-License-Identifier: Apache-2.0
#pragma once
// ScratchBuffer: a growable, 64-byte-aligned host buffer for a kernel's per-thread scratch
// (`thread_local ScratchBuffer bufs[n];` at the call site, one slot per concurrent use). It
// only grows, so a kernel called again with the same or a smaller size reuses it with no
// allocation and no page faults on the hot path.
#include <cstddef>
#include <cstdlib>

#include "engine/core/error.h"

namespace anvil::kernels {

class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { std::free(p_); }

  // At least `bytes` bytes (never null, also for 0), 64-byte aligned; the contents are not
  // kept when it grows. `where` names the kernel in the allocation error.
  void* get(std::size_t bytes, const char* where) {
    if (p_ == nullptr || size_ < bytes) {
      // One spare cache line: never a zero-sized allocation.
      const std::size_t rounded = (bytes + 63) / 64 * 64 + 64;
      void* p = std::aligned_alloc(64, rounded);
      if (!p) fail(where, "cannot allocate a ", rounded, "-byte scratch buffer");
      std::free(p_);
      p_ = p;
      size_ = rounded;
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace anvil::kernels
