// SPDX-License-Identifier: Apache-2.0
// The readers' memory budget (Note [Reader memory budget] in reader_budget.h).
#include "engine/core/reader_budget.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "engine/core/error.h"

namespace anvil {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr const char* kBudgetVariable = "ANVIL_READER_BUDGET_MB";

// 0: no ScopedReaderBudget on this thread.
thread_local std::uint64_t scoped_budget = 0;

std::uint64_t budget_from_environment() {
  const char* text = std::getenv(kBudgetVariable);
  if (text == nullptr || *text == '\0') return kDefaultReaderBudgetMB * kMiB;
  char* end = nullptr;
  errno = 0;
  const unsigned long long mb = std::strtoull(text, &end, 10);
  ANVIL_CHECK(errno == 0 && *end == '\0' && text[0] != '-' && mb >= 1 && mb <= kMaxReaderBudgetMB,
              kBudgetVariable, "must be a whole number of MiB in [1, ", kMaxReaderBudgetMB,
              "], got '", text, "'");
  return mb * kMiB;
}

}  // namespace

std::uint64_t reader_budget_bytes() {
  return scoped_budget != 0 ? scoped_budget : budget_from_environment();
}

ScopedReaderBudget::ScopedReaderBudget(std::uint64_t bytes) : previous_(scoped_budget) {
  ANVIL_CHECK(bytes >= 1 && bytes <= kMaxReaderBudgetMB * kMiB, "ScopedReaderBudget",
              "the budget must be in [1, ", kMaxReaderBudgetMB * kMiB, "] bytes, got ", bytes);
  scoped_budget = bytes;
}

ScopedReaderBudget::~ScopedReaderBudget() { scoped_budget = previous_; }

ReaderBudget::ReaderBudget(const char* reader, std::uint64_t limit)
    : reader_(reader), limit_(limit) {}

void ReaderBudget::charge(std::uint64_t bytes, const std::string& file, const char* what) {
  if (bytes > limit_ - used_)
    fail(reader_, file, ": ", what, " would take ", bytes, " more bytes (", used_,
         " already held by this reader), over the reader memory budget of ", limit_, " bytes (",
         limit_ / kMiB, " MiB; ", kBudgetVariable, " sets it)");
  used_ += bytes;
  if (used_ > peak_) peak_ = used_;
}

std::uint64_t bytes_for(std::uint64_t count, std::uint64_t each) {
  std::uint64_t out = 0;
  return __builtin_mul_overflow(count, each, &out) ? std::numeric_limits<std::uint64_t>::max()
                                                   : out;
}

}  // namespace anvil
