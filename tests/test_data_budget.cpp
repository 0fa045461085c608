// SPDX-License-Identifier: Apache-2.0
// The readers' memory budget (Note [Reader memory budget] in engine/core/reader_budget.h): for
// IDX, CIFAR-10, IMDB, PTB and safetensors, a file whose reading would allocate more than the
// budget is refused with one message naming the reader, the file, what was being allocated and
// the budget, before that allocation. Sparse files (truncate) make files of gigabytes that use no
// disk. The budget is set through ANVIL_READER_BUDGET_MB, the documented knob (so these tests
// also run against readers without a budget, and fail there: they read the files whole).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>
#include <zlib.h>

#include "anvil/anvil.h"
#include "data/cifar.h"
#include "data/idx.h"
#include "data/imdb.h"
#include "data/ptb.h"
#include "helpers/datasets.h"

using namespace anvil;
using namespace anvil::data;
using anvil::test::ScratchDir;
using Catch::Contains;

namespace {

// Sets ANVIL_READER_BUDGET_MB while it lives.
struct BudgetMB {
  explicit BudgetMB(const char* mb) { ::setenv("ANVIL_READER_BUDGET_MB", mb, 1); }
  ~BudgetMB() { ::unsetenv("ANVIL_READER_BUDGET_MB"); }
  BudgetMB(const BudgetMB&) = delete;
  BudgetMB& operator=(const BudgetMB&) = delete;
};

// A sparse file of `bytes` zero bytes (no disk blocks).
std::string sparse_file(const ScratchDir& dir, const std::string& name, std::uint64_t bytes) {
  std::string path = dir.write(name, std::string());
  std::filesystem::resize_file(path, bytes);
  return path;
}

std::vector<std::uint8_t> gzip(const std::vector<std::uint8_t>& raw) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  std::vector<std::uint8_t> out(deflateBound(&zs, raw.size()));
  zs.next_in = const_cast<Bytef*>(raw.data());
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::vector<std::uint8_t> idx_bytes(const std::vector<std::uint32_t>& dims, std::size_t payload) {
  std::vector<std::uint8_t> b = {0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(d >> s));
  b.resize(b.size() + payload, 0);
  return b;
}

// "the reader memory budget of <mb> MiB"
std::string budget_text(std::uint64_t mb) {
  return "over the reader memory budget of " + std::to_string(mb << 20) + " bytes (" +
         std::to_string(mb) + " MiB; ANVIL_READER_BUDGET_MB sets it)";
}

}  // namespace

TEST_CASE("budget: a small .gz IDX within max_bytes is refused at the f32 conversion",
          "[data][budget][idx]") {
  ScratchDir dir("budget");
  // 16 x 1024 x 1024 zero pixels: a 16 KB .gz, 16 MiB gunzipped, 64 MiB as floats.
  const std::string images =
      dir.write("train-images-idx3-ubyte.gz", gzip(idx_bytes({16, 1024, 1024}, 16u << 20)));
  const std::string labels = dir.write("train-labels-idx1-ubyte", idx_bytes({16}, 16));
  BudgetMB budget("48");
  CHECK_THROWS_WITH(read_mnist(images, labels),
                    Contains("read_mnist: " + images) &&
                        Contains("the f32 images would take 67108864") &&
                        Contains(budget_text(48)));
  CHECK_THROWS_WITH(read_mnist_dir(dir.path().string(), "train"),
                    Contains("read_mnist_dir: " + images) && Contains(budget_text(48)));
  // The gunzipped bytes count too: a budget below them stops the inflating.
  BudgetMB tiny("8");
  CHECK_THROWS_WITH(read_idx(images), Contains("read_idx: " + images) &&
                                          Contains("the gunzipped data") &&
                                          Contains(budget_text(8)));
}

TEST_CASE("budget: sparse CIFAR-10 batches are refused by their size", "[data][budget][cifar]") {
  ScratchDir dir("budget");
  // 200,000 records of zeros (valid labels): 615 MB of file, 2.5 GB of floats.
  const std::string batch = sparse_file(dir, "data_batch_1.bin", 3073ull * 200000);
  BudgetMB budget("1024");
  CHECK_THROWS_WITH(read_cifar10({batch}), Contains("read_cifar10: " + batch) &&
                                               Contains("its f32 images would take 2457600000") &&
                                               Contains(budget_text(1024)));
}

TEST_CASE("budget: short IMDB reviews padded to maxlen are refused before the tensor",
          "[data][budget][imdb]") {
  ScratchDir dir("budget");
  // 262,144 one-word reviews (1 MB) at maxlen 500: 1 GB of ids.
  std::string reviews;
  for (int i = 0; i < (1 << 18); ++i) reviews += "1\ta\n";
  const std::string r = dir.write("train.tsv", reviews);
  const std::string index = dir.write("index.json", std::string("{\"a\": 1}"));
  BudgetMB budget("256");
  CHECK_THROWS_WITH(read_imdb(r, index, 5000, 500),
                    Contains("read_imdb: " + r) &&
                        Contains("the token tensor would take 1048576000") &&
                        Contains(budget_text(256)));
  // A sparse word index is refused by its size, before it is read.
  const std::string sparse = sparse_file(dir, "sparse.json", 300ull << 20);
  CHECK_THROWS_WITH(read_imdb_word_index(sparse),
                    Contains("read_imdb_word_index: " + sparse) &&
                        Contains("the file's bytes would take 314572800") &&
                        Contains(budget_text(256)));
}

TEST_CASE("budget: PTB text of newlines and sparse PTB files", "[data][budget][ptb]") {
  ScratchDir dir("budget");
  const Vocabulary vocab({"<eos>", "a"});
  // 8 MiB of newlines: 8 Mi ids of 8 bytes.
  const std::string lines = dir.write("ptb.valid.txt", "a\n" + std::string(8u << 20, '\n'));
  BudgetMB budget("32");
  CHECK_THROWS_WITH(read_ptb_ids(lines, vocab), Contains("read_ptb_ids: " + lines) &&
                                                    Contains("the token ids would take") &&
                                                    Contains(budget_text(32)));
  const std::string sparse = sparse_file(dir, "ptb.train.txt", 64ull << 20);
  CHECK_THROWS_WITH(Vocabulary::build(sparse), Contains("Vocabulary::build: " + sparse) &&
                                                   Contains("the file's bytes") &&
                                                   Contains(budget_text(32)));
  CHECK_THROWS_WITH(read_ptb_words(sparse), Contains("read_ptb_words: " + sparse));
  // Many distinct words: the vocabulary's maps count, not only the text.
  std::string distinct;
  for (int i = 0; i < 200000; ++i) {
    distinct += 'w';
    distinct += std::to_string(i);
    distinct += '\n';
  }
  const std::string words = dir.write("words.txt", distinct);
  CHECK_THROWS_WITH(Vocabulary::build(words),
                    Contains("Vocabulary::build: " + words) && Contains("the vocabulary"));
}

TEST_CASE("budget: a sparse checkpoint is refused before its tensors are allocated",
          "[checkpoint][budget]") {
  ScratchDir dir("budget");
  // One F32 tensor of 64 Mi elements (256 MiB), the data section a hole.
  std::string header =
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[67108864],\"data_offsets\":[0,268435456]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<std::uint8_t> head(8 + header.size());
  const std::uint64_t n = header.size();
  std::memcpy(head.data(), &n, 8);
  std::memcpy(head.data() + 8, header.data(), header.size());
  const std::string path = dir.write("sparse.safetensors", head);
  std::filesystem::resize_file(path, head.size() + (256ull << 20));
  BudgetMB budget("64");
  CHECK_THROWS_WITH(load_safetensors(path),
                    Contains("load_safetensors: " + path) &&
                        Contains("the tensors' data would take 268435456") &&
                        Contains(budget_text(64)));
  CHECK_THROWS_WITH(optim::read_checkpoint_info(path), Contains(path));  // no anvil metadata
}

TEST_CASE("budget: ANVIL_READER_BUDGET_MB is checked", "[data][budget]") {
  ScratchDir dir("budget");
  const std::string path = dir.write("ptb.txt", std::string("a b\n"));
  for (const char* bad : {"0", "-1", "abc", "12x", "1048577"}) {
    BudgetMB budget(bad);
    CHECK_THROWS_WITH(read_ptb_words(path),
                      Contains("ANVIL_READER_BUDGET_MB: must be a whole number of MiB in [1, "
                               "1048576], got '" +
                               std::string(bad) + "'"));
  }
  BudgetMB ok("1");
  CHECK(read_ptb_words(path).size() == 3);
}
