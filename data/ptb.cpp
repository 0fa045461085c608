// SPDX-License-Identifier: Apache-2.0
// PTB text: Vocabulary, the reader (text checks, tokenising, id mapping) and PtbBatcher
// (Note [PTB batch layout] in ptb.h). Whole files are read into memory (ptb.train.txt is 5 MB).
#include "data/ptb.h"

#include "data/file_bytes.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace anvil::data {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// Length of the valid UTF-8 sequence at s[i], or 0 when it is invalid (truncated, overlong,
// surrogate, above U+10FFFF, stray continuation byte).
std::size_t utf8_sequence_length(const std::string& s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < len; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return len;
}

// Throws "<where>: '<path>' is not a text file (...)" for a NUL byte or invalid UTF-8.
void check_text(const std::string& text, const std::string& path, const char* where) {
  std::int64_t line = 1;
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\0')
      fail(where, "'", path, "' is not a text file (NUL byte at byte offset ", i, ", line ", line,
           ")");
    if (c == '\n') ++line;
    const std::size_t n = utf8_sequence_length(text, i);
    if (n == 0)
      fail(where, "'", path, "' is not a text file (invalid UTF-8 at byte offset ", i, ", line ",
           line, ")");
    i += n;
  }
}

// Calls on_word(word, line) for every token and on_eol(line) at the end of every line (a final
// line without '\n' counts when it is not empty). Returns the number of words (without <eos>).
template <typename OnWord, typename OnEol>
std::int64_t tokenize(const std::string& text, OnWord&& on_word, OnEol&& on_eol) {
  std::int64_t words = 0, line = 1;
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    // One line: [i, end).
    std::size_t end = text.find('\n', i);
    const bool has_newline = end != std::string::npos;
    if (!has_newline) end = n;
    std::size_t j = i;
    while (j < end) {
      while (j < end && is_space(text[j])) ++j;
      std::size_t k = j;
      while (k < end && !is_space(text[k])) ++k;
      if (k > j) {
        on_word(std::string_view(text.data() + j, k - j), line);
        ++words;
      }
      j = k;
    }
    on_eol(line);
    ++line;
    i = has_newline ? end + 1 : n;
  }
  return words;
}

// Checks text read from `path`: not empty, no NUL, valid UTF-8.
void check_content(const std::string& text, const std::string& path, const char* where) {
  if (text.empty()) fail(where, "'", path, "' is empty (0 bytes)");
  check_text(text, path, where);
}

// Reads and checks a PTB text file, its size charged to `budget` before it is read.
std::string read_text(const std::string& path, const char* where, ReaderBudget& budget) {
  // Regular files only (a FIFO or /dev/zero is refused: Note [Bounded file reads]).
  std::string text = detail::read_file_text(path, where, budget);
  check_content(text, path, where);
  return text;
}

void fail_no_words(const std::string& path, const char* where) {
  fail(where, "'", path, "' is empty (no words, only whitespace)");
}

// What a distinct word costs a vocabulary being built or loaded, besides its text (charged
// three times: the counting or duplicate-check map, the word list, the id map): the nodes and
// buckets of two hash maps, two std::string headers and the sort's pair (Note [Reader memory
// budget]; estimates, generous).
constexpr std::uint64_t kVocabularyWordBytes = 224;

void charge_vocabulary_word(std::string_view w, ReaderBudget& budget, const std::string& path) {
  budget.charge(kVocabularyWordBytes + 3 * w.size(), path, "the vocabulary");
}

// A token kept as a std::string: its header, and its text when it does not fit in the header.
std::uint64_t string_bytes(std::string_view w) {
  constexpr std::size_t kInline = 15;  // libstdc++'s small-string capacity
  return sizeof(std::string) + (w.size() > kInline ? w.size() + 1 : 0);
}

}  // namespace

// ---- Vocabulary -------------------------------------------------------------------------------

Vocabulary::Vocabulary(std::vector<std::string> words) : words_(std::move(words)) {
  ids_.reserve(words_.size());
  for (std::size_t i = 0; i < words_.size(); ++i) {
    const std::string& w = words_[i];
    ANVIL_CHECK(!w.empty(), "Vocabulary", "empty word at id ", i);
    ANVIL_CHECK(std::none_of(w.begin(), w.end(), [](char c) { return is_space(c) || c == '\n'; }),
                "Vocabulary", "word '", w, "' at id ", i, " contains whitespace");
    const auto [it, inserted] = ids_.emplace(w, static_cast<std::int64_t>(i));
    ANVIL_CHECK(inserted, "Vocabulary", "duplicate word '", w, "' (ids ", it->second, " and ", i,
                ")");
  }
}

Vocabulary Vocabulary::build(const std::vector<std::string>& paths) {
  const char* where = "Vocabulary::build";
  ANVIL_CHECK(!paths.empty(), where, "no files given");
  ReaderBudget budget(where);
  std::unordered_map<std::string, std::int64_t, WordHash, std::equal_to<>> counts;
  for (const std::string& path : paths) {
    const std::string text = read_text(path, where, budget);
    const auto add = [&](std::string_view w) {
      auto it = counts.find(w);
      if (it == counts.end()) {
        charge_vocabulary_word(w, budget, path);
        it = counts.emplace(std::string(w), 0).first;
      }
      ++it->second;
    };
    const std::int64_t words = tokenize(
        text, [&](std::string_view w, std::int64_t) { add(w); }, [&](std::int64_t) { add(kEos); });
    if (words == 0) fail_no_words(path, where);
    budget.release(text.size());  // freed before the next file is read
  }
  std::vector<std::pair<std::string, std::int64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::vector<std::string> words;
  words.reserve(sorted.size());
  for (auto& [w, c] : sorted) words.push_back(std::move(w));
  return Vocabulary(std::move(words));
}

Vocabulary Vocabulary::load(const std::string& path) {
  ReaderBudget budget("Vocabulary::load");
  return load_text(read_text(path, "Vocabulary::load", budget), path, "Vocabulary::load", budget);
}

Vocabulary Vocabulary::parse(const std::string& text, const std::string& name) {
  ReaderBudget budget("Vocabulary::parse");
  check_content(text, name, "Vocabulary::parse");
  return load_text(text, name, "Vocabulary::parse", budget);
}

Vocabulary Vocabulary::load_text(const std::string& text, const std::string& path,
                                 const char* where, ReaderBudget& budget) {
  std::vector<std::string> words;
  std::unordered_map<std::string, std::int64_t, WordHash, std::equal_to<>> first_line;
  std::int64_t line = 1;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t end = text.find('\n', i);
    if (end == std::string::npos) end = text.size();
    std::string_view w(text.data() + i, end - i);
    if (!w.empty() && w.back() == '\r') w.remove_suffix(1);
    if (w.empty())
      fail(where, "'", path, "' line ", line, ": blank line (expected one word per line)");
    if (std::any_of(w.begin(), w.end(), is_space))
      fail(where, "'", path, "' line ", line, ": '", w,
           "' contains whitespace (expected one word per line)");
    charge_vocabulary_word(w, budget, path);
    const auto [it, inserted] = first_line.emplace(std::string(w), line);
    if (!inserted)
      fail(where, "'", path, "' line ", line, ": duplicate word '", w, "' (first on line ",
           it->second, ")");
    words.emplace_back(w);
    ++line;
    i = end + 1;
  }
  return Vocabulary(std::move(words));
}

void Vocabulary::save(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    fail("Vocabulary::save", "cannot open '", path, "' for writing: ", std::strerror(errno));
  for (const std::string& w : words_) out << w << '\n';
  out.flush();
  if (!out) fail("Vocabulary::save", "error while writing '", path, "'");
}

std::int64_t Vocabulary::find(std::string_view word) const {
  const auto it = ids_.find(word);
  return it == ids_.end() ? -1 : it->second;
}

std::int64_t Vocabulary::id(std::string_view word) const {
  const std::int64_t i = find(word);
  ANVIL_CHECK(i >= 0, "Vocabulary::id", "word '", word, "' is not in the vocabulary (", size(),
              " words)");
  return i;
}

const std::string& Vocabulary::word(std::int64_t id) const {
  ANVIL_CHECK(id >= 0 && id < size(), "Vocabulary::word", "id ", id, " is outside [0, ", size(),
              ")");
  return words_[static_cast<std::size_t>(id)];
}

// ---- reader -----------------------------------------------------------------------------------

namespace {

// read_ptb_ids and parse_ptb_ids: `text` (read from `path` only once the vocabulary passed its
// checks, when `text` is null) to ids.
std::vector<std::int64_t> ptb_ids(const std::string* given, const std::string& path,
                                  const Vocabulary& vocab, UnknownWords unknown, const char* where,
                                  ReaderBudget& budget) {
  ANVIL_CHECK(vocab.size() > 0, where, "the vocabulary is empty (reading '", path, "')");
  const std::int64_t eos = vocab.find(kEos);
  ANVIL_CHECK(eos >= 0, where, "the vocabulary (", vocab.size(), " words) has no ", kEos,
              " (reading '", path, "')");
  std::int64_t unk = -1;
  if (unknown == UnknownWords::kMapToUnk) {
    unk = vocab.find(kUnk);
    ANVIL_CHECK(unk >= 0, where, "UnknownWords::kMapToUnk needs ", kUnk, " in the vocabulary (",
                vocab.size(), " words; reading '", path, "')");
  }
  std::string read;
  if (given == nullptr)
    read = read_text(path, where, budget);
  else
    check_content(*given, path, where);
  const std::string& text = given != nullptr ? *given : read;
  // Counted first, so that the ids (8 bytes per token: a newline is an <eos>) are charged
  // before they are allocated, and allocated once.
  std::uint64_t tokens = 0;
  tokenize(
      text, [&](std::string_view, std::int64_t) { ++tokens; }, [&](std::int64_t) { ++tokens; });
  budget.charge(bytes_for(tokens, sizeof(std::int64_t)), path, "the token ids");
  std::vector<std::int64_t> ids;
  ids.reserve(tokens);
  const std::int64_t words = tokenize(
      text,
      [&](std::string_view w, std::int64_t line) {
        std::int64_t id = vocab.find(w);
        if (id < 0) {
          if (unk < 0)
            fail(where, "'", path, "' line ", line, ": word '", w, "' is not in the vocabulary (",
                 vocab.size(), " words); use UnknownWords::kMapToUnk to read it as ", kUnk);
          id = unk;
        }
        ids.push_back(id);
      },
      [&](std::int64_t) { ids.push_back(eos); });
  if (words == 0) fail_no_words(path, where);
  return ids;
}

}  // namespace

std::vector<std::int64_t> read_ptb_ids(const std::string& path, const Vocabulary& vocab,
                                       UnknownWords unknown) {
  const char* where = "read_ptb_ids";
  ReaderBudget budget(where);
  return ptb_ids(nullptr, path, vocab, unknown, where, budget);
}

std::vector<std::int64_t> parse_ptb_ids(const std::string& text, const std::string& name,
                                        const Vocabulary& vocab, UnknownWords unknown) {
  const char* where = "parse_ptb_ids";
  ReaderBudget budget(where);
  return ptb_ids(&text, name, vocab, unknown, where, budget);
}

Tensor read_ptb_tensor(const std::string& path, const Vocabulary& vocab, UnknownWords unknown) {
  const char* where = "read_ptb_tensor";
  ReaderBudget budget(where);
  std::vector<std::int64_t> ids = ptb_ids(nullptr, path, vocab, unknown, where, budget);
  budget.charge(bytes_for(ids.size(), sizeof(std::int64_t)), path, "the tensor copy of the ids");
  const Shape shape{static_cast<std::int64_t>(ids.size())};
  return Tensor::from_vector(ids, shape);
}

namespace {

std::vector<std::string> parse_ptb_words_impl(const std::string& text, const std::string& path,
                                              const char* where, ReaderBudget& budget) {
  // Sized first (so the list is charged and allocated once), then filled.
  std::uint64_t bytes = 0, tokens = 0;
  const std::uint64_t eos_bytes = string_bytes(kEos);
  tokenize(
      text,
      [&](std::string_view w, std::int64_t) {
        bytes += string_bytes(w);
        ++tokens;
      },
      [&](std::int64_t) {
        bytes += eos_bytes;
        ++tokens;
      });
  budget.charge(bytes, path, "the words");
  std::vector<std::string> out;
  out.reserve(tokens);
  const std::int64_t words = tokenize(
      text, [&](std::string_view w, std::int64_t) { out.emplace_back(w); },
      [&](std::int64_t) { out.emplace_back(kEos); });
  if (words == 0) fail_no_words(path, where);
  return out;
}

}  // namespace

std::vector<std::string> read_ptb_words(const std::string& path) {
  const char* where = "read_ptb_words";
  ReaderBudget budget(where);
  return parse_ptb_words_impl(read_text(path, where, budget), path, where, budget);
}

std::vector<std::string> parse_ptb_words(const std::string& text, const std::string& name) {
  const char* where = "parse_ptb_words";
  ReaderBudget budget(where);
  check_content(text, name, where);
  return parse_ptb_words_impl(text, name, where, budget);
}

// ---- batcher ----------------------------------------------------------------------------------

PtbBatcher::PtbBatcher(const std::vector<std::int64_t>& ids, std::int64_t batch_size,
                       std::int64_t seq_len, bool drop_last)
    : batch_size_(batch_size), seq_len_(seq_len), drop_last_(drop_last) {
  init(ids.data(), static_cast<std::int64_t>(ids.size()));
}

PtbBatcher::PtbBatcher(const Tensor& ids, std::int64_t batch_size, std::int64_t seq_len,
                       bool drop_last)
    : batch_size_(batch_size), seq_len_(seq_len), drop_last_(drop_last) {
  check_defined(ids, "PtbBatcher", "ids");
  check_dtype(ids, DType::i64, "PtbBatcher", "ids");
  check_dim(ids, 1, "PtbBatcher", "ids");
  ANVIL_CHECK(ids.device().is_cpu(), "PtbBatcher", "ids must be on the CPU, got ",
              ids.device().str());
  const std::int64_t n = ids.size(0), stride = ids.stride(0);
  std::vector<std::int64_t> flat(static_cast<std::size_t>(n));
  const std::int64_t* p = ids.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) flat[static_cast<std::size_t>(i)] = p[i * stride];
  init(flat.data(), n);
}

void PtbBatcher::init(const std::int64_t* ids, std::int64_t n) {
  ANVIL_CHECK(batch_size_ >= 1, "PtbBatcher", "batch_size must be >= 1, got ", batch_size_);
  ANVIL_CHECK(seq_len_ >= 1, "PtbBatcher", "seq_len must be >= 1, got ", seq_len_);
  stream_len_ = n / batch_size_;
  ANVIL_CHECK(stream_len_ >= 2, "PtbBatcher", n, " tokens in ", batch_size_,
              " streams give streams of ", stream_len_,
              " tokens; at least 2 are needed (input and target)");
  const std::int64_t columns = stream_len_ - 1;  // input positions that have a next token
  num_batches_ = drop_last_ ? columns / seq_len_ : (columns + seq_len_ - 1) / seq_len_;
  ANVIL_CHECK(num_batches_ >= 1, "PtbBatcher", "streams of ", stream_len_,
              " tokens hold no full window of ", seq_len_, " inputs with drop_last (", n,
              " tokens, batch_size ", batch_size_, ")");
  streams_ = Tensor::empty({batch_size_, stream_len_}, DType::i64);
  // Stream b = ids[b*L, (b+1)*L): the B*L first ids, row-major, are exactly the [B, L] matrix.
  std::copy(ids, ids + batch_size_ * stream_len_, streams_.data<std::int64_t>());
  next_ = 0;
}

std::int64_t PtbBatcher::num_targets() const {
  const std::int64_t columns = drop_last_ ? num_batches_ * seq_len_ : stream_len_ - 1;
  return batch_size_ * columns;
}

PtbBatch PtbBatcher::batch(std::int64_t i) const {
  ANVIL_CHECK(i >= 0 && i < num_batches_, "PtbBatcher::batch", "index ", i, " is outside [0, ",
              num_batches_, ")");
  const std::int64_t start = i * seq_len_;
  const std::int64_t t = std::min(seq_len_, stream_len_ - 1 - start);
  PtbBatch out;
  out.index = i;
  out.start = start;
  out.inputs = Tensor::empty({batch_size_, t}, DType::i64);   // [B, t]
  out.targets = Tensor::empty({batch_size_, t}, DType::i64);  // [B, t]
  const std::int64_t* s = streams_.data<std::int64_t>();      // [B, L]
  std::int64_t* x = out.inputs.data<std::int64_t>();
  std::int64_t* y = out.targets.data<std::int64_t>();
  for (std::int64_t b = 0; b < batch_size_; ++b) {
    const std::int64_t* row = s + b * stream_len_ + start;
    std::copy(row, row + t, x + b * t);
    std::copy(row + 1, row + 1 + t, y + b * t);
  }
  return out;
}

PtbBatch PtbBatcher::next() {
  ANVIL_CHECK(has_next(), "PtbBatcher::next", "no batch left (", num_batches_,
              " per epoch); call reset() to start again");
  return batch(next_++);
}

PtbBatch shard_rows(const PtbBatch& batch, std::int64_t num_shards, std::int64_t shard) {
  const std::int64_t rows = batch.inputs.size(0);
  ANVIL_CHECK(num_shards >= 1 && shard >= 0 && shard < num_shards, "shard_rows", "shard ", shard,
              " of ", num_shards, " is not a shard");
  ANVIL_CHECK(rows % num_shards == 0, "shard_rows", "a batch of ", rows,
              " streams does not split evenly into ", num_shards, " shards");
  const std::int64_t per = rows / num_shards, begin = shard * per;
  // Rows [begin, begin + per) of the dense [B, t] windows PtbBatcher makes, copied with plain
  // row copies: data/ sees engine/core only, and Tensor::slice lives in engine/autograd.
  auto rows_of = [&](const Tensor& full) {
    ANVIL_CHECK(full.dim() == 2 && full.dtype() == DType::i64 && full.is_contiguous() &&
                    full.device() == Device::cpu(),
                "shard_rows", "expects a dense [B, t] i64 window on the CPU, got ",
                shape_str(full.sizes()));
    const std::int64_t cols = full.size(1);
    Tensor part = Tensor::empty({per, cols}, DType::i64);
    std::copy_n(full.data<std::int64_t>() + begin * cols, per * cols, part.data<std::int64_t>());
    return part;
  };
  PtbBatch out = batch;
  out.inputs = rows_of(batch.inputs);
  out.targets = rows_of(batch.targets);
  return out;
}

}  // namespace anvil::data
