// SPDX-License-Identifier: Apache-2.0
// IMDB reader: the tokenizer rule, the Keras encoding (start 1, out-of-vocabulary 2, ids =
// rank + 3, num_words cut, pad_sequences 'pre' padding and truncation) on a small generated word
// index and reviews file, then a corpus of malformed files, one test case per kind.
//
// All files are generated at run time into a scratch folder (helpers/datasets.h). The expected
// id rows were written by hand from Keras' code (keras.datasets.imdb.load_data: [start_char] +
// [w + index_from ...], then w if w < num_words else oov_char; pad_sequences: s[-maxlen:], zeros
// in front) and checked with a few lines of Python doing the same.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "data/imdb.h"
#include "helpers/datasets.h"

using namespace anvil;
using namespace anvil::data;
using anvil::test::ScratchDir;
using Catch::Contains;
using Ids = std::vector<std::int64_t>;

namespace {

const char* const kIndexJson =
    R"({"the": 1, "and": 2, "a": 3, "of": 4, "to": 5, "is": 6, "br": 7, "it's": 8, "film": 9, "movie": 10})";

Ids row(const Tensor& t, std::int64_t r) {
  const std::int64_t* p = t.data<std::int64_t>() + r * t.size(1);
  return Ids(p, p + t.size(1));
}

}  // namespace

TEST_CASE("IMDB tokenizer: lowercase words of letters and digits and apostrophes", "[data][imdb]") {
  CHECK(imdb_tokenize("Don't STOP<br /><br />it's 'quoted' well-made 10/10 Caf\xC3\xA9 ''") ==
        std::vector<std::string>{"don't", "stop", "br", "br", "it's", "quoted", "well", "made",
                                 "10", "10", "caf\xC3\xA9"});
  CHECK(imdb_tokenize("").empty());
  CHECK(imdb_tokenize(" ... ' !").empty());
}

TEST_CASE("IMDB encoding matches keras load_data + pad_sequences (pre padding and pre truncation)",
          "[data][imdb]") {
  ScratchDir dir("imdb");
  const std::string index = dir.write("imdb_word_index.json", kIndexJson);
  const std::string reviews = dir.write("reviews.tsv",
                                        "1\tThe film is GREAT, and it's a must-see!\n"
                                        "0\tA movie<br /><br />of the year\n"
                                        "1\tto\n");
  // num_words = 12: ranks 1..8 (ids 4..11) are kept, "film" (12) and "movie" (13) become 2.
  const SequenceDataset ds = read_imdb(reviews, index, 12, 8);
  REQUIRE(ds.tokens.sizes() == Shape{3, 8});
  REQUIRE(ds.labels.sizes() == Shape{3});
  CHECK(ds.tokens.dtype() == DType::i64);
  CHECK(ds.labels.dtype() == DType::i64);
  CHECK(ds.vocab_size == 12);
  CHECK(ds.num_classes == 2);
  CHECK(ds.size() == 3);
  // [1, the 4, film 2, is 9, great 2 (not in the index), and 5, it's 11, a 6, must 2, see 2]:
  // 10 ids, the first 2 cut (truncating='pre' drops the start mark too).
  CHECK(row(ds.tokens, 0) == Ids{2, 9, 2, 5, 11, 6, 2, 2});
  // [1, a 6, movie 2, br 10, br 10, of 7, the 4, year 2]: exactly maxlen.
  CHECK(row(ds.tokens, 1) == Ids{1, 6, 2, 10, 10, 7, 4, 2});
  // [1, to 8], zeros in front (padding='pre').
  CHECK(row(ds.tokens, 2) == Ids{0, 0, 0, 0, 0, 0, 1, 8});
  const std::int64_t* y = ds.labels.data<std::int64_t>();
  CHECK(Ids(y, y + 3) == Ids{1, 0, 1});
  CHECK_THAT(ds.source, Contains("reviews.tsv") && Contains("imdb_word_index.json"));

  // A large num_words keeps every word: film 12, movie 13.
  const SequenceDataset all = read_imdb(reviews, index, 5000, 12);
  CHECK(row(all.tokens, 0) == Ids{0, 0, 1, 4, 12, 9, 2, 5, 11, 6, 2, 2});
  CHECK(row(all.tokens, 1) == Ids{0, 0, 0, 0, 1, 6, 13, 10, 10, 7, 4, 2});
  CHECK(all.vocab_size == 5000);

  // The same as imdb_encode() on one text, before padding.
  const ImdbWordIndex words = read_imdb_word_index(index);
  CHECK(words.size() == 10);
  CHECK(words.at("it's") == 8);
  CHECK(imdb_encode("A movie<br /><br />of the year", words, 12) == Ids{1, 6, 2, 10, 10, 7, 4, 2});
}

TEST_CASE("IMDB reviews file: CRLF line ends and a last line without newline and an empty review",
          "[data][imdb]") {
  ScratchDir dir("imdb");
  const std::string index = dir.write("index.json", kIndexJson);
  const std::string reviews =
      dir.write("r.tsv", "0\tthe\r\n1\t\r\n1\tand a\tof");  // a tab inside the text
  const SequenceDataset ds = read_imdb(reviews, index, 100, 4);
  REQUIRE(ds.tokens.sizes() == Shape{3, 4});
  CHECK(row(ds.tokens, 0) == Ids{0, 0, 1, 4});
  CHECK(row(ds.tokens, 1) == Ids{0, 0, 0, 1});
  CHECK(row(ds.tokens, 2) == Ids{1, 5, 6, 7});
  const std::int64_t* y = ds.labels.data<std::int64_t>();
  CHECK(Ids(y, y + 3) == Ids{0, 1, 1});
}

// ---- malformed files: one test case per kind
// -------------------------------------------------------

namespace {
// A reviews file named `file` holding `content` is refused with a message naming the file and
// then saying `message`.
void check_reviews_refused(const std::string& file, const std::string& content,
                           const std::string& message) {
  ScratchDir dir("imdb");
  const std::string index = dir.write("index.json", kIndexJson);
  const std::string reviews = dir.write(file, content);
  REQUIRE_THROWS_WITH(read_imdb(reviews, index), Contains(reviews + message));
}
}  // namespace

TEST_CASE("IMDB malformed: missing reviews or word index file", "[data][imdb][malformed]") {
  ScratchDir dir("imdb");
  const std::string index = dir.write("index.json", kIndexJson);
  const std::string reviews = dir.write("r.tsv", "1\tthe\n");
  const std::string missing = (dir.path() / "absent.tsv").string();
  REQUIRE_THROWS_WITH(read_imdb(missing, index),
                      Contains("read_imdb: " + missing + ": no such file"));
  const std::string no_index = (dir.path() / "absent.json").string();
  REQUIRE_THROWS_WITH(read_imdb(reviews, no_index), Contains(no_index + ": no such file"));
}

TEST_CASE("IMDB malformed: empty reviews file", "[data][imdb][malformed]") {
  check_reviews_refused("empty.tsv", "", ": is empty (0 bytes)");
}

TEST_CASE("IMDB malformed: binary data (NUL byte or invalid UTF-8)", "[data][imdb][malformed]") {
  ScratchDir dir("imdb");
  const std::string index = dir.write("index.json", kIndexJson);
  const std::string nul = dir.write("nul.tsv", std::string("1\tthe\n0\ta\0b\n", 12));
  REQUIRE_THROWS_WITH(read_imdb(nul, index),
                      Contains(nul + ": is not a text file (NUL byte at byte offset 9, line 2)"));
  const std::string latin1 = dir.write("latin1.tsv", "1\tcaf\xE9\n");
  REQUIRE_THROWS_WITH(
      read_imdb(latin1, index),
      Contains(latin1 + ": is not a text file (invalid UTF-8 at byte offset 5, line 1)"));
}

TEST_CASE("IMDB malformed: blank line", "[data][imdb][malformed]") {
  check_reviews_refused("blank.tsv", "1\tthe\n\n0\ta\n", " line 2: blank line");
}

TEST_CASE("IMDB malformed: line without a tab", "[data][imdb][malformed]") {
  check_reviews_refused("notab.tsv", "1\tthe\n0 a film\n", " line 2: no tab");
}

TEST_CASE("IMDB malformed: label other than 0 or 1", "[data][imdb][malformed]") {
  ScratchDir dir("imdb");
  const std::string index = dir.write("index.json", kIndexJson);
  for (const std::string label : {"2", "pos", "", " 1", "01", "-1"}) {
    const std::string reviews =
        dir.write("label.tsv", std::string("1\tthe\n").append(label).append("\ta\n"));
    REQUIRE_THROWS_WITH(read_imdb(reviews, index), Contains(std::string(reviews)
                                                                .append(" line 2: label '")
                                                                .append(label)
                                                                .append("' is not 0 or 1")));
  }
}

TEST_CASE("IMDB malformed: word index that is not valid JSON", "[data][imdb][malformed]") {
  ScratchDir dir("imdb");
  const std::string reviews = dir.write("r.tsv", "1\tthe\n");
  const std::string index = dir.write("index.json", R"({"the": 1, "and": )");
  REQUIRE_THROWS_WITH(read_imdb(reviews, index),
                      Contains(index + ": malformed JSON: ") && Contains("parse error"));
  REQUIRE_THROWS_WITH(read_imdb_word_index(dir.write("empty.json", "")),
                      Contains("is empty (0 bytes)"));
  REQUIRE_THROWS_WITH(read_imdb_word_index(dir.write("bin.json", std::string("{\"a\"\0: 1}", 9))),
                      Contains("is not a text file (NUL byte"));
}

TEST_CASE("IMDB malformed: word index that is not an object of words", "[data][imdb][malformed]") {
  ScratchDir dir("imdb");
  const std::string array = dir.write("array.json", R"(["the", "and"])");
  REQUIRE_THROWS_WITH(read_imdb_word_index(array),
                      Contains(array + ": must be a JSON object") && Contains("found an array"));
  const std::string empty = dir.write("empty.json", "{}");
  REQUIRE_THROWS_WITH(read_imdb_word_index(empty), Contains(empty + ": has no words"));
}

TEST_CASE("IMDB malformed: non-integer ranks", "[data][imdb][malformed]") {
  ScratchDir dir("imdb");
  const std::string flt = dir.write("f.json", R"({"the": 1, "and": 2.5})");
  REQUIRE_THROWS_WITH(read_imdb_word_index(flt),
                      Contains(flt + ": the rank of 'and' is 2.5 (a float), not an integer"));
  const std::string str = dir.write("s.json", R"({"the": "1"})");
  REQUIRE_THROWS_WITH(read_imdb_word_index(str),
                      Contains("the rank of 'the' is \"1\" (a string), not an integer"));
  const std::string null = dir.write("n.json", R"({"the": null})");
  REQUIRE_THROWS_WITH(read_imdb_word_index(null),
                      Contains("the rank of 'the' is null (null), not an integer"));
  const std::string one_point_zero = dir.write("z.json", R"({"the": 1.0})");
  REQUIRE_THROWS_WITH(read_imdb_word_index(one_point_zero), Contains("(a float), not an integer"));
}

TEST_CASE("IMDB malformed: ranks below 1 or too large", "[data][imdb][malformed]") {
  ScratchDir dir("imdb");
  const std::string zero = dir.write("zero.json", R"({"the": 0})");
  REQUIRE_THROWS_WITH(read_imdb_word_index(zero),
                      Contains(zero + ": the rank of 'the' is 0; ranks go from 1"));
  const std::string neg = dir.write("neg.json", R"({"the": -3})");
  REQUIRE_THROWS_WITH(read_imdb_word_index(neg), Contains("the rank of 'the' is -3"));
  const std::string huge = dir.write("huge.json", R"({"the": 18446744073709551615})");
  REQUIRE_THROWS_WITH(read_imdb_word_index(huge),
                      Contains("the rank of 'the' is 18446744073709551615"));
}

TEST_CASE("IMDB malformed: two words with the same rank or a word given twice",
          "[data][imdb][malformed]") {
  ScratchDir dir("imdb");
  const std::string rank = dir.write("rank.json", R"({"the": 1, "and": 2, "a": 2})");
  REQUIRE_THROWS_WITH(read_imdb_word_index(rank), Contains(rank) &&
                                                      Contains("have the same rank 2") &&
                                                      Contains("'and'") && Contains("'a'"));
  const std::string key = dir.write("key.json", R"({"the": 1, "and": 2, "the": 3})");
  REQUIRE_THROWS_WITH(read_imdb_word_index(key), Contains(key + ": duplicate key 'the'"));
}

TEST_CASE("IMDB malformed: num_words and maxlen out of range", "[data][imdb][malformed]") {
  ScratchDir dir("imdb");
  const std::string index = dir.write("index.json", kIndexJson);
  const std::string reviews = dir.write("r.tsv", "1\tthe\n");
  REQUIRE_THROWS_WITH(read_imdb(reviews, index, 2, 10),
                      Contains("num_words must be at least 3") && Contains("got 2"));
  REQUIRE_THROWS_WITH(read_imdb(reviews, index, 100, 0),
                      Contains("maxlen must be at least 1, got 0"));
  // num_words = 3: every word is out of vocabulary.
  CHECK(row(read_imdb(reviews, index, 3, 3).tokens, 0) == Ids{0, 1, 2});
}
