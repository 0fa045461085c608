// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the IMDB reader (data/imdb.h). The input is split at its first NUL byte:
// the part before is the word index JSON, the part after the reviews file (without a NUL, the
// whole input is both). parse_imdb_word_index and parse_imdb run on them. Oracles: every token
// id lies in [0, num_words) and every label in {0, 1}. anvil::Error is the expected way to
// reject an input; any other exception, a crash or a sanitizer report is a finding. Built and
// run by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "data/imdb.h"
#include "tests/fuzz/fuzz_guard.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const anvil_fuzz::TimeGuard guard(size);  // linear time (scripts/fuzz.sh)
  using namespace anvil::data;
  const char* p = reinterpret_cast<const char*>(data);
  const char* nul = static_cast<const char*>(std::memchr(p, 0, size));
  const std::string index = nul ? std::string(p, nul) : std::string(p, size);
  const std::string reviews = nul ? std::string(nul + 1, p + size) : std::string(p, size);
  try {
    (void)parse_imdb_word_index(index, "fuzz_index.json");
  } catch (const anvil::Error&) {}
  try {
    constexpr std::int64_t kWords = 50, kMaxlen = 20;
    const SequenceDataset ds =
        parse_imdb(reviews, index, "fuzz.tsv", "fuzz_index.json", kWords, kMaxlen);
    const std::int64_t* t = ds.tokens.data<std::int64_t>();
    for (std::int64_t i = 0; i < ds.tokens.numel(); ++i)
      if (t[i] < 0 || t[i] >= kWords) __builtin_trap();
    const std::int64_t* y = ds.labels.data<std::int64_t>();
    for (std::int64_t i = 0; i < ds.labels.numel(); ++i)
      if (y[i] != 0 && y[i] != 1) __builtin_trap();
  } catch (const anvil::Error&) {
    // rejected with a message: the expected outcome for a malformed input
  }
  return 0;
}
