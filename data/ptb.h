// SPDX-License-Identifier: Apache-2.0
#pragma once
// Penn Treebank word-level text (Mikolov's split: ptb.train/valid/test.txt): a vocabulary, a
// reader that turns a file into a stream of token ids, and the batcher that lays the stream out
// for truncated back-propagation through time.
//
// Format: one sentence per line, tokens separated by whitespace; the reader appends `<eos>` at
// every line end (also for blank lines, as the usual PTB readers do). `<unk>` is an ordinary PTB
// token (the corpus already replaced rare words by it); it is also what unknown words map to
// when the user asks for that (UnknownWords::kMapToUnk).
//
// Note [PTB batch layout]
// The stream of n ids is cut into B parallel streams of L = n / B ids (the tail n - B*L is
// dropped): stream b holds ids [b*L, (b+1)*L) and lives in row b of every batch. Batch i covers
// columns [i*T, i*T + t) of all streams, t = min(T, L - 1 - i*T): inputs are streams[:, c] and
// targets streams[:, c + 1] (the next token of the same stream). So batch i+1 continues every
// stream exactly where batch i stopped, and an LSTM's final hidden state of batch i (row b) is the
// right initial state for row b of batch i+1. The last batch is shorter than T unless (L-1) is a
// multiple of T; with drop_last it is left out. This is the layout of PyTorch's
// word_language_model example (batchify + get_batch) and of Zaremba et al.'s reader.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/core/reader_budget.h"
#include "engine/core/tensor.h"

namespace anvil::data {

inline constexpr const char* kEos = "<eos>";
inline constexpr const char* kUnk = "<unk>";

// Hash for string keys that also looks up std::string_view without building a string.
struct WordHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Words <-> ids. Ids are 0..size()-1, dense.
class Vocabulary {
 public:
  Vocabulary() = default;
  // From a list of distinct words: word i gets id i. Throws on duplicates, empty words or
  // words containing whitespace.
  explicit Vocabulary(std::vector<std::string> words);

  // Counts the tokens of the files (with one `<eos>` per line) and orders the words by count,
  // descending, ties alphabetically (byte order): deterministic ids, the most frequent first.
  static Vocabulary build(const std::vector<std::string>& paths);
  static Vocabulary build(const std::string& path) { return build(std::vector<std::string>{path}); }
  // One word per line, line i = id i (a trailing carriage return is ignored). Throws on a
  // missing, empty or binary file, a blank line, a word with inner whitespace and a duplicate
  // (naming both lines).
  static Vocabulary load(const std::string& path);
  // The same from text in memory (`name` only for messages); the PTB fuzz target calls it.
  static Vocabulary parse(const std::string& text, const std::string& name);
  // Writes the format load() reads.
  void save(const std::string& path) const;

  std::int64_t size() const { return static_cast<std::int64_t>(words_.size()); }
  bool contains(std::string_view word) const { return find(word) >= 0; }
  // The id of `word`; throws when it is not in the vocabulary.
  std::int64_t id(std::string_view word) const;
  // The id of `word`, or -1.
  std::int64_t find(std::string_view word) const;
  // The word of `id`; throws when id is outside [0, size()).
  const std::string& word(std::int64_t id) const;
  const std::vector<std::string>& words() const { return words_; }

 private:
  static Vocabulary load_text(const std::string& text, const std::string& path, const char* where,
                              ReaderBudget& budget);
  std::vector<std::string> words_;
  std::unordered_map<std::string, std::int64_t, WordHash, std::equal_to<>> ids_;
};

// What the reader does with a token missing from the vocabulary.
enum class UnknownWords {
  kReject,    // throw, naming the file, the line and the word
  kMapToUnk,  // use the id of `<unk>` (the vocabulary must contain `<unk>`)
};

// Reads a PTB text file into token ids (one `<eos>` per line appended). Throws anvil::Error naming
// the file for: a missing/unreadable file, an empty file (no words), binary data (a NUL byte or
// invalid UTF-8: "not a text file"), and, with kReject, a word missing from `vocab`.
std::vector<std::int64_t> read_ptb_ids(const std::string& path, const Vocabulary& vocab,
                                       UnknownWords unknown = UnknownWords::kReject);
// The same as a 1-D int64 tensor [n].
Tensor read_ptb_tensor(const std::string& path, const Vocabulary& vocab,
                       UnknownWords unknown = UnknownWords::kReject);
// The tokens of a file as words (with "<eos>" per line), the same checks except the vocabulary.
std::vector<std::string> read_ptb_words(const std::string& path);
// read_ptb_ids and read_ptb_words on text in memory (`name` only for messages): the same checks
// and results. Pure (no I/O); the PTB fuzz target calls them.
std::vector<std::int64_t> parse_ptb_ids(const std::string& text, const std::string& name,
                                        const Vocabulary& vocab,
                                        UnknownWords unknown = UnknownWords::kReject);
std::vector<std::string> parse_ptb_words(const std::string& text, const std::string& name);

// One mini-batch of PtbBatcher: inputs and targets [B, t] int64 (t <= T), row b = stream b.
struct PtbBatch {
  Tensor inputs;
  Tensor targets;
  std::int64_t index = 0;  // which batch of the epoch, 0-based
  std::int64_t start = 0;  // first column of the streams it covers
};

// Lays a token stream into B parallel streams and yields consecutive [B, T] windows
// (Note [PTB batch layout]).
class PtbBatcher {
 public:
  // Throws when batch_size or seq_len < 1 or when the streams would hold fewer than 2 ids.
  PtbBatcher(const std::vector<std::int64_t>& ids, std::int64_t batch_size, std::int64_t seq_len,
             bool drop_last = false);
  PtbBatcher(const Tensor& ids, std::int64_t batch_size, std::int64_t seq_len,
             bool drop_last = false);

  std::int64_t batch_size() const { return batch_size_; }
  std::int64_t seq_len() const { return seq_len_; }
  std::int64_t stream_length() const { return stream_len_; }  // L = n / B
  std::int64_t num_batches() const { return num_batches_; }
  // Number of target tokens per epoch (B * sum of window lengths).
  std::int64_t num_targets() const;
  // The [B, L] matrix of streams (a copy-free handle; do not modify).
  const Tensor& streams() const { return streams_; }

  // Batch i of the epoch (0 <= i < num_batches()).
  PtbBatch batch(std::int64_t i) const;
  // Sequential iteration: has_next()/next(), reset() to start the epoch again.
  bool has_next() const { return next_ < num_batches_; }
  PtbBatch next();
  void reset() { next_ = 0; }

 private:
  void init(const std::int64_t* ids, std::int64_t n);

  std::int64_t batch_size_ = 0, seq_len_ = 0, stream_len_ = 0, num_batches_ = 0;
  bool drop_last_ = false;
  std::int64_t next_ = 0;
  Tensor streams_;  // [B, L] int64
};

// Note [Sharded PTB streams]
// Data parallelism over S ranks with a global batch of B streams (S divides B): every rank lays
// out the whole token stream exactly as one process at batch B (Note [PTB batch layout]) and
// takes rows [r*B/S, (r+1)*B/S) of every batch, i.e. the same B/S streams for the whole epoch.
// Its LSTM therefore carries the hidden state of exactly those rows from window to window, the
// state one process at batch B carries in the same rows. Every rank has the same number of
// windows of the same lengths (the columns are shared), so all ranks take the same steps.
// Because an LSTM row depends only on its own row's tokens, and the loss is a mean over rows,
// the mean of the S ranks' gradients is the gradient of one process at batch B up to rounding
// (Note [Data-parallel determinism]); contiguous per-rank segments of the text would give other
// streams and not have this property.
PtbBatch shard_rows(const PtbBatch& batch, std::int64_t num_shards, std::int64_t shard);

}  // namespace anvil::data
