// SPDX-License-Identifier: Apache-2.0
#pragma once
// IMDB movie reviews (sentiment, 2 classes) encoded the way keras.datasets.imdb.load_data() and
// the Keras IMDB LSTM example encode them, from text the user can inspect:
//   - a word index JSON (Keras' imdb_word_index.json): {"the": 1, "and": 2, ...}, rank 1 = the
//     most frequent word;
//   - a reviews file: one review per line, "<label>\t<text>", label 0 (negative) or 1 (positive).
//
// Note [IMDB encoding]
// As load_data(num_words, start_char=1, oov_char=2, index_from=3) then
// pad_sequences(maxlen) with its defaults:
//   - a review becomes [1] + one id per word; a word of rank r has id r + 3 (0 = padding,
//     1 = start, 2 = out of vocabulary); an id >= num_words, and a word missing from the index,
//     becomes 2;
//   - longer than maxlen: the FIRST ids are cut (truncating='pre', so a long review loses its
//     start mark too); shorter: zeros are put in front (padding='pre').
// Keras' own files are already ids; a review given as text is cut into words first
// (imdb_tokenize): ASCII letters are lowercased; a word is a run of ASCII letters, digits,
// apostrophes and non-ASCII (UTF-8) bytes, everything else separates words; apostrophes at either
// end of a word are dropped ("'Don't'" -> "don't"). So "<br /><br />" gives the words "br",
// "br", as the Keras index (which has "br") expects.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/ptb.h"  // WordHash
#include "engine/core/tensor.h"

namespace anvil::data {

inline constexpr std::int64_t kImdbPad = 0;
inline constexpr std::int64_t kImdbStart = 1;
inline constexpr std::int64_t kImdbOov = 2;
inline constexpr std::int64_t kImdbIndexFrom = 3;

// Token sequences with one label each.
struct SequenceDataset {
  Tensor tokens;                // i64 [N, maxlen], ids in [0, vocab_size)
  Tensor labels;                // i64 [N], values in [0, num_classes)
  std::int64_t vocab_size = 0;  // = num_words: the Embedding's number of rows
  std::int64_t num_classes = 2;
  std::string source;  // the files it was read from

  std::int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

using ImdbWordIndex = std::unordered_map<std::string, std::int64_t, WordHash, std::equal_to<>>;

// Reads and encodes the reviews (Note [IMDB encoding]). Throws anvil::Error naming the file and,
// for the reviews, the line: missing files, an empty reviews file, binary data (NUL or invalid
// UTF-8), a blank line, a line without a tab, a label other than 0 or 1, and everything
// read_imdb_word_index() rejects; num_words < 3 and maxlen < 1 too.
SequenceDataset read_imdb(const std::string& reviews_path, const std::string& word_index_path,
                          std::int64_t num_words = 5000, std::int64_t maxlen = 500);

// The word index: word -> rank. Throws for malformed JSON, a top level that is not an object,
// no words, a key given twice, a rank that is not an integer (1.5, "7", null ...), a rank < 1
// or too large for an id, and two words with the same rank.
ImdbWordIndex read_imdb_word_index(const std::string& path);

// read_imdb and read_imdb_word_index on text in memory (the names only for messages): the same
// checks and results. Pure (no I/O); the IMDB fuzz target calls them.
SequenceDataset parse_imdb(const std::string& reviews, const std::string& word_index,
                           const std::string& reviews_name, const std::string& word_index_name,
                           std::int64_t num_words = 5000, std::int64_t maxlen = 500);
ImdbWordIndex parse_imdb_word_index(const std::string& text, const std::string& name);

// The words of a review text (Note [IMDB encoding]).
std::vector<std::string> imdb_tokenize(std::string_view text);

// One review as ids, before padding: [1, id(word_1), ...] (Note [IMDB encoding]).
std::vector<std::int64_t> imdb_encode(std::string_view text, const ImdbWordIndex& index,
                                      std::int64_t num_words);

}  // namespace anvil::data
