// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the PTB text reader (data/ptb.h): the input is read as a vocabulary file
// (Vocabulary::parse) and as corpus text (parse_ptb_words, then parse_ptb_ids against the
// vocabulary of its own words, then PtbBatcher over the ids). Oracles: every id maps back to
// its word, and the batches hold exactly the stream's tokens. anvil::Error is the expected way
// to reject an input; any other exception, a crash or a sanitizer report is a finding. Built
// and run by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "data/ptb.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace anvil::data;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const Vocabulary v = Vocabulary::parse(text, "fuzz.vocab");
    for (std::int64_t i = 0; i < v.size(); ++i)
      if (v.id(v.word(i)) != i) __builtin_trap();
  } catch (const anvil::Error&) {}
  try {
    const std::vector<std::string> words = parse_ptb_words(text, "fuzz.txt");
    const std::set<std::string> distinct(words.begin(), words.end());
    const Vocabulary vocab(std::vector<std::string>(distinct.begin(), distinct.end()));
    const std::vector<std::int64_t> ids = parse_ptb_ids(text, "fuzz.txt", vocab);
    if (ids.size() != words.size()) __builtin_trap();
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (vocab.word(ids[i]) != words[i]) __builtin_trap();
    if (ids.size() >= 4) {
      PtbBatcher b(ids, 2, 3);
      std::int64_t targets = 0;
      while (b.has_next()) targets += b.next().targets.numel();
      if (targets != b.num_targets()) __builtin_trap();
    }
  } catch (const anvil::Error&) {
    // rejected with a message: the expected outcome for a malformed input
  }
  return 0;
}
