// SPDX-License-Identifier: Apache-2.0
// IMDB reviews: the word index (engine/core/json_reader.h, checked key by key), the tokenizer and
// the Keras encoding (Note [IMDB encoding] in imdb.h), within the reader's memory budget
// (Note [Reader memory budget]). Whole files are read into memory (the Keras word
// index is 1.6 MB, 25,000 reviews about 33 MB).
#include "data/imdb.h"

#include <algorithm>
#include <limits>

#include "data/image_dataset.h"  // detail::read_file_bytes
#include "engine/core/json_reader.h"
#include "engine/core/reader_budget.h"

namespace anvil::data {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when it is invalid (truncated, overlong,
// surrogate, above U+10FFFF, stray continuation byte).
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + len > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < len; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return len;
}

// The file as text; throws for a missing or empty file, a NUL byte or invalid UTF-8.
void check_text(const std::string& text, const std::string& path, const char* where) {
  if (text.empty()) fail(where, path, ": is empty (0 bytes)");
  std::int64_t line = 1;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == '\0')
      fail(where, path, ": is not a text file (NUL byte at byte offset ", i, ", line ", line, ")");
    if (text[i] == '\n') ++line;
    const std::size_t n = utf8_length(text, i);
    if (n == 0)
      fail(where, path, ": is not a text file (invalid UTF-8 at byte offset ", i, ", line ", line,
           ")");
    i += n;
  }
}

std::string read_text(const std::string& path, const char* where, ReaderBudget& budget) {
  std::string text = detail::read_file_text(path, where, budget);
  check_text(text, path, where);
  return text;
}

bool is_word_byte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '\'' ||
         c >= 0x80;
}

// Calls on_word(word) for each word of `text` (lowercased into `buf`).
template <typename OnWord>
void for_each_word(std::string_view text, std::string& buf, OnWord&& on_word) {
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    while (i < n && !is_word_byte(static_cast<unsigned char>(text[i]))) ++i;
    std::size_t j = i;
    while (j < n && is_word_byte(static_cast<unsigned char>(text[j]))) ++j;
    std::size_t a = i, b = j;
    while (a < b && text[a] == '\'') ++a;
    while (b > a && text[b - 1] == '\'') --b;
    if (b > a) {
      buf.assign(text.data() + a, b - a);
      for (char& c : buf)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      on_word(std::string_view(buf));
    }
    i = j;
  }
}

void encode_into(std::string_view text, const ImdbWordIndex& index, std::int64_t num_words,
                 std::string& buf, std::vector<std::int64_t>& ids) {
  ids.clear();
  ids.push_back(kImdbStart);
  for_each_word(text, buf, [&](std::string_view w) {
    const auto it = index.find(w);
    std::int64_t id = kImdbOov;
    if (it != index.end() && it->second + kImdbIndexFrom < num_words)
      id = it->second + kImdbIndexFrom;
    ids.push_back(id);
  });
}

// Parses and checks a word index (defined below, after the public readers that use it).
ImdbWordIndex word_index_from(const std::string& text, const std::string& path, const char* where,
                              ReaderBudget& budget);

void check_num_words(std::int64_t num_words, const char* where) {
  ANVIL_CHECK(num_words >= 3, where, "num_words must be at least 3 (ids 0 = padding, 1 = start, ",
              "2 = out of vocabulary), got ", num_words);
}

}  // namespace

std::vector<std::string> imdb_tokenize(std::string_view text) {
  std::vector<std::string> words;
  std::string buf;
  for_each_word(text, buf, [&](std::string_view w) { words.emplace_back(w); });
  return words;
}

std::vector<std::int64_t> imdb_encode(std::string_view text, const ImdbWordIndex& index,
                                      std::int64_t num_words) {
  check_num_words(num_words, "imdb_encode");
  std::vector<std::int64_t> ids;
  std::string buf;
  encode_into(text, index, num_words, buf, ids);
  return ids;
}

ImdbWordIndex read_imdb_word_index(const std::string& path) {
  const char* where = "read_imdb_word_index";
  ReaderBudget budget(where);
  return word_index_from(read_text(path, where, budget), path, where, budget);
}

ImdbWordIndex parse_imdb_word_index(const std::string& text, const std::string& name) {
  const char* where = "parse_imdb_word_index";
  ReaderBudget budget(where);
  check_text(text, name, where);
  return word_index_from(text, name, where, budget);
}

namespace {

// What one word of the index costs besides its text: the JSON key and value (charged by
// parse_json), then the hash-map node and bucket of ImdbWordIndex and of the rank check.
constexpr std::uint64_t kIndexEntryBytes = 96;

ImdbWordIndex word_index_from(const std::string& text, const std::string& path, const char* where,
                              ReaderBudget& budget) {
  // One object level, keys unique (parse_json refuses a repeated one in O(1): Note [Linear
  // JSON]); a rank is an integer, so anything nested is refused below, but no deeper than 64.
  const JsonValue doc = parse_json(text, path, where, "malformed JSON", budget);
  if (!doc.is_object())
    fail(where, path, ": must be a JSON object {\"word\": rank, ...}, found ", doc.type_name());
  if (doc.size() == 0) fail(where, path, ": has no words (an empty JSON object)");
  constexpr std::int64_t kMaxRank = std::numeric_limits<std::int64_t>::max() - kImdbIndexFrom;
  budget.charge(bytes_for(doc.size(), kIndexEntryBytes), path, "the word index");
  ImdbWordIndex index;
  index.reserve(doc.size());
  std::unordered_map<std::int64_t, const std::string*> by_rank;
  by_rank.reserve(doc.size());
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const std::string& word = doc.keys()[i];
    const JsonValue& value = doc.items()[i];
    if (!value.is_integer())
      fail(where, path, ": the rank of ", json_prefix(word), " is ", value.preview(), " (",
           value.type_name(), "), not an integer");
    std::int64_t rank = 0;
    if (!value.as_int(rank) || rank < 1 || rank > kMaxRank)
      fail(where, path, ": the rank of ", json_prefix(word), " is ", value.preview(),
           "; ranks go from 1 (the most frequent word) to ", kMaxRank);
    const auto it = index.emplace(word, rank).first;
    const auto [r, fresh] = by_rank.emplace(rank, &it->first);
    if (!fresh)
      fail(where, path, ": words ", json_prefix(*r->second), " and ", json_prefix(word),
           " have the same rank ", rank);
  }
  return index;
}

// read_imdb and parse_imdb; the texts are read from the paths when null (the reviews first:
// their problems, a path mix-up or a bad line, show before the index is read).
SequenceDataset imdb_from(const std::string* reviews, const std::string* word_index,
                          const std::string& reviews_path, const std::string& word_index_path,
                          std::int64_t num_words, std::int64_t maxlen, const char* where) {
  check_num_words(num_words, where);
  ANVIL_CHECK(maxlen >= 1, where, "maxlen must be at least 1, got ", maxlen);
  ReaderBudget budget(where);  // one for the reviews, the index and the tensors
  std::string read;
  if (reviews == nullptr)
    read = read_text(reviews_path, where, budget);
  else
    check_text(*reviews, reviews_path, where);
  const std::string& text = reviews != nullptr ? *reviews : read;

  struct Line {
    std::string_view text;
    std::int64_t label;
  };
  const auto newlines = static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n'));
  budget.charge(bytes_for(newlines + 1, sizeof(Line)), reviews_path, "the review lines");
  std::vector<Line> lines;
  lines.reserve(newlines + 1);
  std::size_t longest = 0;
  std::int64_t line_no = 0;
  for (std::size_t i = 0; i < text.size();) {
    ++line_no;
    std::size_t end = text.find('\n', i);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + i, end - i);
    i = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty())
      fail(where, reviews_path, " line ", line_no, ": blank line (expected \"<label>\\t<text>\")");
    const std::size_t tab = line.find('\t');
    if (tab == std::string_view::npos)
      fail(where, reviews_path, " line ", line_no,
           ": no tab (expected \"<label>\\t<text>\" with label 0 or 1)");
    const std::string_view label = line.substr(0, tab);
    if (label != "0" && label != "1")
      fail(where, reviews_path, " line ", line_no, ": label '", label, "' is not 0 or 1");
    lines.push_back({line.substr(tab + 1), label == "1" ? 1 : 0});
    longest = std::max(longest, line.size());
  }
  if (lines.empty()) fail(where, reviews_path, ": has no reviews");

  ImdbWordIndex index;
  if (word_index != nullptr) {
    check_text(*word_index, word_index_path, "parse_imdb_word_index");
    index = word_index_from(*word_index, word_index_path, "parse_imdb_word_index", budget);
  } else {
    const char* index_where = "read_imdb_word_index";
    index = word_index_from(read_text(word_index_path, index_where, budget), word_index_path,
                            index_where, budget);
  }
  const auto n = static_cast<std::int64_t>(lines.size());
  // [N, maxlen] ids (8 bytes each: a 4-byte review becomes maxlen * 8 bytes), the labels, and
  // the ids of the longest review before it is cut (at most one word per two bytes, + start).
  budget.charge(
      bytes_for(bytes_for(static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(maxlen)),
                sizeof(std::int64_t)),
      reviews_path, "the token tensor");
  budget.charge(bytes_for(static_cast<std::uint64_t>(n), sizeof(std::int64_t)) +
                    bytes_for(longest / 2 + 2, sizeof(std::int64_t)),
                reviews_path, "the labels and a review's ids");
  SequenceDataset ds;
  ds.vocab_size = num_words;
  ds.num_classes = 2;
  ds.tokens = Tensor::zeros({n, maxlen}, DType::i64);  // [N, maxlen], padding 0 in front
  ds.labels = Tensor::empty({n}, DType::i64);          // [N]
  std::int64_t* tokens = ds.tokens.data<std::int64_t>();
  std::int64_t* labels = ds.labels.data<std::int64_t>();
  std::string buf;
  std::vector<std::int64_t> ids;
  for (std::int64_t r = 0; r < n; ++r) {
    encode_into(lines[r].text, index, num_words, buf, ids);
    const auto len = static_cast<std::int64_t>(ids.size());
    const std::int64_t keep = std::min(len, maxlen);  // the last `keep` ids (truncating='pre')
    std::copy(ids.end() - keep, ids.end(), tokens + r * maxlen + (maxlen - keep));
    labels[r] = lines[r].label;
  }
  ds.source = reviews_path + ", " + word_index_path;
  return ds;
}

}  // namespace

SequenceDataset read_imdb(const std::string& reviews_path, const std::string& word_index_path,
                          std::int64_t num_words, std::int64_t maxlen) {
  return imdb_from(nullptr, nullptr, reviews_path, word_index_path, num_words, maxlen, "read_imdb");
}

SequenceDataset parse_imdb(const std::string& reviews, const std::string& word_index,
                           const std::string& reviews_name, const std::string& word_index_name,
                           std::int64_t num_words, std::int64_t maxlen) {
  return imdb_from(&reviews, &word_index, reviews_name, word_index_name, num_words, maxlen,
                   "parse_imdb");
}

}  // namespace anvil::data
