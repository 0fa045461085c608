// SPDX-License-Identifier: Apache-2.0
// PTB text: the vocabulary, the reader on the real validation/test files (counts checked against
// an independent Python count), the batcher layout (Note [PTB batch layout]) and a corpus of
// malformed files, each rejected with a message naming the file and the problem.
//
// Real files: tests/helpers/datasets.h (missing files FAIL the tests, saying where they looked).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "anvil/anvil.h"
#include "helpers/datasets.h"

using namespace anvil;
using namespace anvil::data;
using anvil::test::ptb_dir;
using anvil::test::ptb_file;
namespace fs = std::filesystem;

// ---- real files ---------------------------------------------------------------------------------

TEST_CASE("PTB valid and test files have the documented token counts", "[data][ptb]") {
  // README of the dataset: 3,370 / 3,761 lines, 73,760 / 82,430 tokens with <eos>.
  const auto valid = read_ptb_words(ptb_file("ptb.valid.txt"));
  const auto test = read_ptb_words(ptb_file("ptb.test.txt"));
  CHECK(valid.size() == 73760);
  CHECK(test.size() == 82430);
  CHECK(std::count(valid.begin(), valid.end(), std::string(kEos)) == 3370);
  CHECK(std::count(test.begin(), test.end(), std::string(kEos)) == 3761);
  // The first line: " consumers may want to move their telephones a little closer to the tv set "
  REQUIRE(valid.size() > 15);
  CHECK(valid[0] == "consumers");
  CHECK(valid[13] == "set");
  CHECK(valid[14] == kEos);
  CHECK(valid[15] == "<unk>");
}

TEST_CASE("PTB vocabulary built from the validation file is ordered by frequency", "[data][ptb]") {
  const Vocabulary vocab = Vocabulary::build(ptb_file("ptb.valid.txt"));
  // Counted independently (Python collections.Counter): 6,022 distinct tokens with <eos>.
  CHECK(vocab.size() == 6022);
  // Most frequent: the (4,122), <unk> (3,485), <eos> (3,370), N (2,603), of, to, a, in.
  CHECK(vocab.id("the") == 0);
  CHECK(vocab.id("<unk>") == 1);
  CHECK(vocab.id(kEos) == 2);
  CHECK(vocab.id("N") == 3);
  CHECK(vocab.word(4) == "of");
  CHECK(vocab.word(5) == "to");
  // Ties alphabetically: the last three words occur once each.
  CHECK(vocab.word(6019) == "yourself");
  CHECK(vocab.word(6020) == "zealand");
  CHECK(vocab.word(6021) == "zurich");
  CHECK(vocab.contains("telephones"));
  CHECK_FALSE(vocab.contains("beleaguered"));  // only in the test file
  CHECK(vocab.find("beleaguered") == -1);

  // valid + test: the 7,595 words of the corpus vocabulary these parts use, plus <eos>.
  const Vocabulary both = Vocabulary::build({ptb_file("ptb.valid.txt"), ptb_file("ptb.test.txt")});
  CHECK(both.size() == 7596);
  CHECK(both.id("the") == 0);

  // Deterministic: building twice gives the same ids.
  CHECK(Vocabulary::build(ptb_file("ptb.valid.txt")).words() == vocab.words());
}

TEST_CASE("PTB reader maps the real files to ids and round-trips through the vocabulary",
          "[data][ptb]") {
  const std::string valid_path = ptb_file("ptb.valid.txt");
  const std::string test_path = ptb_file("ptb.test.txt");
  const Vocabulary vocab = Vocabulary::build(valid_path);
  const auto ids = read_ptb_ids(valid_path, vocab);
  const auto words = read_ptb_words(valid_path);
  REQUIRE(ids.size() == 73760);
  for (std::size_t i = 0; i < ids.size(); ++i) REQUIRE(vocab.word(ids[i]) == words[i]);

  const Tensor t = read_ptb_tensor(valid_path, vocab);
  CHECK(t.dtype() == DType::i64);
  CHECK(t.sizes() == Shape{73760});
  CHECK(t.data<std::int64_t>()[0] == vocab.id("consumers"));

  // The test file with the validation vocabulary: 3,368 tokens are unknown. Rejected by default,
  // naming the file, the line (5) and the first unknown word; mapped to <unk> on request.
  CHECK_THROWS_WITH(read_ptb_ids(test_path, vocab), Catch::Contains("ptb.test.txt") &&
                                                        Catch::Contains("line 5") &&
                                                        Catch::Contains("'beleaguered'") &&
                                                        Catch::Contains("not in the vocabulary"));
  const auto mapped = read_ptb_ids(test_path, vocab, UnknownWords::kMapToUnk);
  REQUIRE(mapped.size() == 82430);
  const auto test_words = read_ptb_words(test_path);
  const std::int64_t unk = vocab.id(kUnk);
  std::int64_t unknown = 0, unk_ids = 0, real_unk = 0;
  for (std::size_t i = 0; i < mapped.size(); ++i) {
    if (!vocab.contains(test_words[i])) ++unknown;
    if (test_words[i] == kUnk) ++real_unk;
    if (mapped[i] == unk) ++unk_ids;
  }
  CHECK(unknown == 3368);
  CHECK(unk_ids == unknown + real_unk);
}

TEST_CASE("PTB vocabulary saves and loads with the same ids", "[data][ptb]") {
  test::ScratchDir dir("ptb");
  const Vocabulary vocab = Vocabulary::build(ptb_file("ptb.valid.txt"));
  const std::string path = (dir.path() / "vocab.txt").string();
  vocab.save(path);
  const Vocabulary back = Vocabulary::load(path);
  CHECK(back.size() == vocab.size());
  CHECK(back.words() == vocab.words());
  CHECK(back.id("zurich") == vocab.id("zurich"));
  // A fixed vocabulary from a file reads the same ids.
  CHECK(read_ptb_ids(ptb_file("ptb.valid.txt"), back) ==
        read_ptb_ids(ptb_file("ptb.valid.txt"), vocab));
}

// ---- small generated files ----------------------------------------------------------------------

TEST_CASE("PTB reader tokenises on whitespace and appends eos per line", "[data][ptb]") {
  test::ScratchDir dir("ptb");
  // Tabs, runs of spaces, CRLF, a blank line (one <eos>), no newline at the end of the last line.
  const std::string path = dir.write("small.txt", " a b  a\t c \r\n\nb a\n c");
  CHECK(read_ptb_words(path) == std::vector<std::string>{"a", "b", "a", "c", "<eos>", "<eos>", "b",
                                                         "a", "<eos>", "c", "<eos>"});
  const Vocabulary v = Vocabulary::build(path);
  // Counts: a 3, <eos> 4, b 2, c 2 -> <eos>, a, b, c (b before c: tie, alphabetical).
  CHECK(v.words() == std::vector<std::string>{"<eos>", "a", "b", "c"});
  CHECK(read_ptb_ids(path, v) == std::vector<std::int64_t>{1, 2, 1, 3, 0, 0, 2, 1, 0, 3, 0});
  // UTF-8 words are text.
  const std::string utf8 = dir.write("utf8.txt", "caf\xC3\xA9 na\xC3\xAFve \xE2\x82\xAC\n");
  CHECK(read_ptb_words(utf8).size() == 4);
}

TEST_CASE("PTB vocabulary lookups reject unknown words and ids", "[data][ptb]") {
  const Vocabulary v(std::vector<std::string>{"<eos>", "a"});
  CHECK_THROWS_WITH(v.id("zz"), Catch::Contains("Vocabulary::id") && Catch::Contains("'zz'"));
  CHECK_THROWS_WITH(v.word(2), Catch::Contains("Vocabulary::word") && Catch::Contains("id 2"));
  CHECK_THROWS_WITH(v.word(-1), Catch::Contains("id -1"));
  CHECK_THROWS_WITH(Vocabulary(std::vector<std::string>{"a", "b", "a"}),
                    Catch::Contains("duplicate word 'a'") && Catch::Contains("ids 0 and 2"));
  CHECK_THROWS_WITH(Vocabulary(std::vector<std::string>{"a b"}), Catch::Contains("whitespace"));
}

TEST_CASE("PTB malformed files are rejected with the file and the problem named",
          "[data][ptb][errors]") {
  test::ScratchDir dir("ptb");
  const Vocabulary vocab(std::vector<std::string>{"<eos>", "<unk>", "a", "b"});

  const std::string missing = (dir.path() / "nope.txt").string();
  CHECK_THROWS_WITH(read_ptb_ids(missing, vocab), Catch::Contains("read_ptb_ids") &&
                                                      Catch::Contains("nope.txt") &&
                                                      Catch::Contains("no such file"));
  CHECK_THROWS_WITH(Vocabulary::build(missing),
                    Catch::Contains("Vocabulary::build") && Catch::Contains("nope.txt"));
  CHECK_THROWS_WITH(Vocabulary::load(missing),
                    Catch::Contains("Vocabulary::load") && Catch::Contains("no such file"));
  CHECK_THROWS_WITH(read_ptb_ids(dir.path().string(), vocab), Catch::Contains("is a directory"));

  const std::string empty = dir.write("empty.txt", "");
  CHECK_THROWS_WITH(read_ptb_ids(empty, vocab),
                    Catch::Contains("empty.txt") && Catch::Contains("is empty"));
  const std::string blank = dir.write("blank.txt", "\n  \n\t\n");
  CHECK_THROWS_WITH(read_ptb_ids(blank, vocab),
                    Catch::Contains("blank.txt") && Catch::Contains("is empty (no words"));
  CHECK_THROWS_WITH(Vocabulary::build(blank), Catch::Contains("is empty"));
  CHECK_THROWS_WITH(Vocabulary::load(empty),
                    Catch::Contains("Vocabulary::load") && Catch::Contains("is empty"));

  const std::string nul = dir.write("nul.txt", std::string("a b\na\0b\n", 8));
  CHECK_THROWS_WITH(read_ptb_ids(nul, vocab),
                    Catch::Contains("nul.txt") && Catch::Contains("not a text file") &&
                        Catch::Contains("NUL byte") && Catch::Contains("line 2"));
  // The start of a gzip file (ptb.train.txt.gz passed raw): 0x1f 0x8b is not UTF-8.
  const std::string gz =
      dir.write("ptb.train.txt.gz", std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00", 8));
  CHECK_THROWS_WITH(read_ptb_ids(gz, vocab),
                    Catch::Contains("ptb.train.txt.gz") && Catch::Contains("not a text file"));
  const std::string latin1 = dir.write("latin1.txt", "a caf\xE9 b\n");  // ISO-8859-1 e-acute
  CHECK_THROWS_WITH(read_ptb_words(latin1), Catch::Contains("latin1.txt") &&
                                                Catch::Contains("not a text file") &&
                                                Catch::Contains("invalid UTF-8"));
  const std::string truncated =
      dir.write("trunc.txt", "a \xE2\x82");  // a 3-byte sequence cut short
  CHECK_THROWS_WITH(read_ptb_words(truncated), Catch::Contains("invalid UTF-8"));
  const std::string surrogate = dir.write("surrogate.txt", "a \xED\xA0\x80\n");
  CHECK_THROWS_WITH(read_ptb_words(surrogate), Catch::Contains("invalid UTF-8"));
  CHECK_THROWS_WITH(Vocabulary::load(nul),
                    Catch::Contains("Vocabulary::load") && Catch::Contains("not a text file"));

  const std::string unknown = dir.write("unknown.txt", "a b\nb a\na zebra b\n");
  CHECK_THROWS_WITH(read_ptb_ids(unknown, vocab),
                    Catch::Contains("unknown.txt") && Catch::Contains("line 3") &&
                        Catch::Contains("'zebra'") && Catch::Contains("not in the vocabulary") &&
                        Catch::Contains("kMapToUnk"));
  CHECK(read_ptb_ids(unknown, vocab, UnknownWords::kMapToUnk) ==
        std::vector<std::int64_t>{2, 3, 0, 3, 2, 0, 2, 1, 3, 0});
  const Vocabulary no_unk(std::vector<std::string>{"<eos>", "a", "b"});
  CHECK_THROWS_WITH(read_ptb_ids(unknown, no_unk, UnknownWords::kMapToUnk),
                    Catch::Contains("needs <unk>"));
  const Vocabulary no_eos(std::vector<std::string>{"a", "b"});
  CHECK_THROWS_WITH(read_ptb_ids(unknown, no_eos), Catch::Contains("has no <eos>"));
}

TEST_CASE("PTB vocabulary files with duplicates or blank lines are rejected",
          "[data][ptb][errors]") {
  test::ScratchDir dir("ptb");
  const std::string dup = dir.write("dup_vocab.txt", "<eos>\nthe\n<unk>\nof\nthe\n");
  CHECK_THROWS_WITH(Vocabulary::load(dup),
                    Catch::Contains("Vocabulary::load") && Catch::Contains("dup_vocab.txt") &&
                        Catch::Contains("line 5") && Catch::Contains("duplicate word 'the'") &&
                        Catch::Contains("first on line 2"));
  const std::string blank = dir.write("blank_vocab.txt", "<eos>\n\nthe\n");
  CHECK_THROWS_WITH(Vocabulary::load(blank), Catch::Contains("blank_vocab.txt") &&
                                                 Catch::Contains("line 2") &&
                                                 Catch::Contains("blank line"));
  const std::string spaced = dir.write("spaced_vocab.txt", "<eos>\nthe cat\n");
  CHECK_THROWS_WITH(Vocabulary::load(spaced),
                    Catch::Contains("line 2") && Catch::Contains("whitespace"));
  // CRLF and no final newline are accepted.
  const std::string crlf = dir.write("crlf_vocab.txt", "<eos>\r\nthe\r\nof");
  CHECK(Vocabulary::load(crlf).words() == std::vector<std::string>{"<eos>", "the", "of"});
}

// ---- batcher
// --------------------------------------------------------------------------------------

TEST_CASE("PtbBatcher lays the stream into B contiguous rows with shifted targets",
          "[data][ptb][batcher]") {
  // ids 0..102: B = 4 gives L = 25 (tail 100..102 dropped); T = 7 -> windows 7, 7, 7, 3.
  std::vector<std::int64_t> ids(103);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i);
  PtbBatcher batcher(ids, 4, 7);
  CHECK(batcher.stream_length() == 25);
  CHECK(batcher.num_batches() == 4);
  CHECK(batcher.num_targets() == 4 * 24);
  CHECK(batcher.streams().sizes() == Shape{4, 25});

  std::vector<std::vector<std::int64_t>> rows_in(4), rows_tg(4);
  std::int64_t count = 0;
  while (batcher.has_next()) {
    const PtbBatch b = batcher.next();
    CHECK(b.index == count);
    CHECK(b.start == count * 7);
    const std::int64_t t = count < 3 ? 7 : 3;
    REQUIRE(b.inputs.sizes() == Shape{4, t});
    REQUIRE(b.targets.sizes() == Shape{4, t});
    CHECK(b.inputs.dtype() == DType::i64);
    const auto* x = b.inputs.data<std::int64_t>();
    const auto* y = b.targets.data<std::int64_t>();
    for (std::int64_t r = 0; r < 4; ++r) {
      for (std::int64_t c = 0; c < t; ++c) {
        // Stream r is ids [25 r, 25 r + 25); column start + c of it.
        CHECK(x[r * t + c] == 25 * r + b.start + c);
        CHECK(y[r * t + c] == x[r * t + c] + 1);  // the next token of the same stream
        rows_in[r].push_back(x[r * t + c]);
        rows_tg[r].push_back(y[r * t + c]);
      }
    }
    ++count;
  }
  CHECK(count == 4);
  // Across batches each row is one contiguous stream: inputs L-1 ids, targets shifted by one.
  for (std::int64_t r = 0; r < 4; ++r) {
    REQUIRE(rows_in[r].size() == 24);
    for (std::int64_t c = 0; c < 24; ++c) {
      CHECK(rows_in[r][c] == 25 * r + c);
      CHECK(rows_tg[r][c] == 25 * r + c + 1);
    }
  }
  CHECK_THROWS_WITH(batcher.next(), Catch::Contains("no batch left") && Catch::Contains("reset"));
  batcher.reset();
  REQUIRE(batcher.has_next());
  CHECK(batcher.next().inputs.data<std::int64_t>()[0] == 0);
  CHECK_THROWS_WITH(batcher.batch(4), Catch::Contains("index 4"));

  // drop_last: the short window goes.
  PtbBatcher dropping(ids, 4, 7, /*drop_last=*/true);
  CHECK(dropping.num_batches() == 3);
  CHECK(dropping.num_targets() == 4 * 21);
  CHECK(dropping.batch(2).inputs.sizes() == Shape{4, 7});
  // (L-1) a multiple of T: no short window either way.
  CHECK(PtbBatcher(ids, 4, 8).num_batches() == 3);
  CHECK(PtbBatcher(ids, 4, 8, true).num_batches() == 3);
}

TEST_CASE("PtbBatcher on the real validation stream", "[data][ptb][batcher]") {
  const Vocabulary vocab = Vocabulary::build(ptb_file("ptb.valid.txt"));
  const Tensor ids = read_ptb_tensor(ptb_file("ptb.valid.txt"), vocab);
  // LSTM-32 at batch 128 (networks.md): L = 73760 / 128 = 576, (576 - 1) / 32 -> 18 windows, the
  // last of 31.
  PtbBatcher batcher(ids, 128, 32);
  CHECK(batcher.stream_length() == 576);
  CHECK(batcher.num_batches() == 18);
  CHECK(batcher.batch(17).inputs.sizes() == Shape{128, 31});
  CHECK(PtbBatcher(ids, 128, 32, true).num_batches() == 17);
  // ptb_small: batch 20, unroll 20: L = 3688, 184 windows of 20 and one of 7.
  PtbBatcher small(ids, 20, 20);
  CHECK(small.stream_length() == 3688);
  CHECK(small.num_batches() == 185);
  const auto* all = ids.data<std::int64_t>();
  const PtbBatch b = small.batch(1);
  // Row 3 of batch 1 starts at token 3 * 3688 + 20.
  CHECK(b.inputs.data<std::int64_t>()[3 * 20] == all[3 * 3688 + 20]);
  CHECK(b.targets.data<std::int64_t>()[3 * 20] == all[3 * 3688 + 21]);
}

TEST_CASE("PtbBatcher rejects bad sizes and inputs", "[data][ptb][batcher][errors]") {
  const std::vector<std::int64_t> ids{1, 2, 3, 4, 5};
  CHECK_THROWS_WITH(PtbBatcher(ids, 0, 3), Catch::Contains("batch_size must be >= 1"));
  CHECK_THROWS_WITH(PtbBatcher(ids, 2, 0), Catch::Contains("seq_len must be >= 1"));
  CHECK_THROWS_WITH(PtbBatcher(ids, 3, 2),
                    Catch::Contains("5 tokens in 3 streams") && Catch::Contains("at least 2"));
  CHECK_THROWS_WITH(PtbBatcher(ids, 2, 3, true), Catch::Contains("drop_last"));
  CHECK_THROWS_WITH(PtbBatcher(Tensor::zeros({2, 3}, DType::i64), 1, 1),
                    Catch::Contains("PtbBatcher"));
  CHECK_THROWS_WITH(PtbBatcher(Tensor::zeros({6}, DType::f32), 1, 1),
                    Catch::Contains("PtbBatcher"));
  // A strided 1-D view is read element by element.
  PtbBatcher from_tensor(Tensor::arange(10, DType::i64), 2, 2);
  CHECK(from_tensor.stream_length() == 5);
  CHECK(from_tensor.batch(1).targets.data<std::int64_t>()[1] == 4);
}
