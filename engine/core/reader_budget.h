// SPDX-License-Identifier: Apache-2.0
#pragma once
// One memory budget per reader call (Note [Reader memory budget]): the dataset readers (IDX,
// CIFAR-10, IMDB, PTB) and the checkpoint reader (safetensors) charge what they are about to
// allocate, before they allocate it, and refuse a file that would take more.
//
// Note [Reader memory budget]
// A file's size says little about the memory its reader needs: a 1 MB .gz inflates to 1 GB, a
// byte of CIFAR becomes a 4-byte float, a 4-byte IMDB review becomes maxlen 8-byte ids, a
// newline in PTB text an 8-byte id, a sparse file of 20 GB holds no disk blocks at all. So every
// reader call owns one ReaderBudget and charges it with what it really allocates: the file's
// bytes (by its size, before reading), the decompressed bytes (as they grow), the parsed JSON,
// the converted tensors and every copy, each before the allocation. Memory freed during the call
// is released again, so the budget bounds the reader's peak. The first charge that would pass
// the limit throws one anvil::Error naming the reader, the file, what was being allocated and
// the budget; nothing of that size has been allocated then. The limit is ANVIL_READER_BUDGET_MB
// (MiB, default 2048: the largest real split anvil reads, CIFAR-10 train, needs about 650 MB),
// or a ScopedReaderBudget set by the program. Per-element overheads of containers (hash-map
// nodes, tensor headers) are charged as fixed estimates; they are small next to the data.
#include <cstdint>
#include <string>

namespace anvil {

// Default budget: 2 GiB; accepted values of ANVIL_READER_BUDGET_MB: 1 .. kMaxReaderBudgetMB.
inline constexpr std::uint64_t kDefaultReaderBudgetMB = 2048;
inline constexpr std::uint64_t kMaxReaderBudgetMB = std::uint64_t{1} << 20;  // 1 TiB

// The budget of a reader call in bytes: the innermost ScopedReaderBudget of this thread, else
// ANVIL_READER_BUDGET_MB, else the default. Throws anvil::Error for a variable that is not an
// integer in [1, kMaxReaderBudgetMB].
std::uint64_t reader_budget_bytes();

// Sets the budget of reader calls on this thread while it lives (tests, programs that read
// larger files); bytes in [1, kMaxReaderBudgetMB MiB].
class ScopedReaderBudget {
 public:
  explicit ScopedReaderBudget(std::uint64_t bytes);
  ~ScopedReaderBudget();
  ScopedReaderBudget(const ScopedReaderBudget&) = delete;
  ScopedReaderBudget& operator=(const ScopedReaderBudget&) = delete;

 private:
  std::uint64_t previous_;
};

// The memory one reader call may hold at once.
class ReaderBudget {
 public:
  // `reader` names the reading function in messages ("read_cifar10"); it must outlive this.
  explicit ReaderBudget(const char* reader, std::uint64_t limit = reader_budget_bytes());

  // Counts `bytes` the reader is about to allocate for `what` while reading `file`. Throws
  // "<reader>: <file>: <what> would take N more bytes (M already held by this reader), over the
  // reader memory budget of B bytes (...)" when the total would pass the limit.
  void charge(std::uint64_t bytes, const std::string& file, const char* what);
  // Gives back bytes charged before (memory the reader freed).
  void release(std::uint64_t bytes) { used_ -= bytes < used_ ? bytes : used_; }

  const char* reader() const { return reader_; }
  std::uint64_t used() const { return used_; }
  std::uint64_t peak() const { return peak_; }
  std::uint64_t limit() const { return limit_; }

 private:
  const char* reader_;
  std::uint64_t limit_;
  std::uint64_t used_ = 0, peak_ = 0;
};

// `count` elements of `each` bytes, saturating at the largest std::uint64_t (which no budget
// admits), so a charge computed from a corrupt size cannot wrap around.
std::uint64_t bytes_for(std::uint64_t count, std::uint64_t each);

}  // namespace anvil
