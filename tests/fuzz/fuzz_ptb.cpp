// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the PTB text reader (data/ptb.h): the input is read as a vocabulary file
// (Vocabulary::parse) and as corpus text (parse_ptb_words, then parse_ptb_ids against the
// vocabulary of its own words, then PtbBatcher over the ids). Oracles: the words equal those of
// a second tokenizer written here independently of data/ptb.cpp (Note [Independent PTB
// oracle]), every id maps back to its word, and the batches hold exactly the stream's tokens.
// anvil::Error is the expected way to reject an input; any other exception, a crash or a
// sanitizer report is a finding. Built and run by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "data/ptb.h"
#include "tests/fuzz/fuzz_guard.h"

namespace {

// Note [Independent PTB oracle]
// parse_ptb_words and parse_ptb_ids share data/ptb.cpp's tokenizer, so comparing them with each
// other cannot find a tokenizer bug that stays in bounds (a dropped last word, a wrong <eos>).
// This one is written differently, one character at a time, from the format as docs state it
// (data/ptb.h): tokens are separated by space, tab, CR, VT or FF; every '\n' ends a line and
// adds <eos>, blank lines included; a last line without '\n' adds <eos> when it is not empty.
struct OracleWords {
  std::vector<std::string> tokens;  // words and <eos>, in order
  std::int64_t words = 0;           // without <eos>
};

OracleWords oracle_words(const std::string& text) {
  OracleWords out;
  std::string word;
  const auto flush = [&] {
    if (word.empty()) return;
    out.tokens.push_back(word);
    ++out.words;
    word.clear();
  };
  for (const char c : text) {
    if (c == '\n') {
      flush();
      out.tokens.emplace_back(anvil::data::kEos);
    } else if (c != '\0' && std::strchr(" \t\r\v\f", c) != nullptr) {
      flush();
    } else {
      word.push_back(c);
    }
  }
  flush();
  if (!text.empty() && text.back() != '\n') out.tokens.emplace_back(anvil::data::kEos);
  return out;
}

// Plain ASCII without NUL: text the reader must accept whenever it has a word.
bool plain_ascii(const std::string& text) {
  for (const char c : text)
    if (c == '\0' || static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const anvil_fuzz::TimeGuard guard(size);  // linear time (scripts/fuzz.sh)
  using namespace anvil::data;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const Vocabulary v = Vocabulary::parse(text, "fuzz.vocab");
    for (std::int64_t i = 0; i < v.size(); ++i)
      if (v.id(v.word(i)) != i) __builtin_trap();
  } catch (const anvil::Error&) {}
  const OracleWords expected = oracle_words(text);
  try {
    const std::vector<std::string> words = parse_ptb_words(text, "fuzz.txt");
    if (expected.words == 0 || words != expected.tokens) __builtin_trap();
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
    // Rejected with a message: right for empty text, NUL, invalid UTF-8 or no word at all, so
    // plain ASCII text with a word is never rejected.
    if (expected.words > 0 && plain_ascii(text)) __builtin_trap();
  }
  return 0;
}
