// SPDX-License-Identifier: Apache-2.0
// CIFAR-10 binary reader: batches written in the real record format (1 label byte, then the R,
// G and B planes of 32x32) and read back, checking the plane order, the concatenation of files
// and the folder layouts; then a corpus of malformed batches, one test case per kind.
//
// All files are generated at run time into a scratch folder (helpers/datasets.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "data/cifar.h"
#include "helpers/datasets.h"

using namespace anvil;
using namespace anvil::data;
using anvil::test::ScratchDir;
using Catch::Contains;
using Bytes = std::vector<std::uint8_t>;

namespace {

// The pixel byte of record `seed`, channel c (0 R, 1 G, 2 B), row y, column x: distinct per
// channel and position, so a swapped plane or a transposed image shows.
std::uint8_t pixel(int seed, int c, int y, int x) {
  return static_cast<std::uint8_t>(seed * 31 + c * 85 + y * 7 + x * 3);
}

// One record in the file format: label, then R plane, G plane, B plane, each row-major 32x32.
void append_record(Bytes& out, std::uint8_t label, int seed) {
  out.push_back(label);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x) out.push_back(pixel(seed, c, y, x));
}

Bytes batch(const std::vector<std::uint8_t>& labels, int first_seed) {
  Bytes out;
  for (std::size_t i = 0; i < labels.size(); ++i)
    append_record(out, labels[i], first_seed + static_cast<int>(i));
  return out;
}

// Checks image n of ds against record `seed` and its label.
void check_image(const ImageDataset& ds, std::int64_t n, int seed, std::int64_t label) {
  CHECK(ds.labels.data<std::int64_t>()[n] == label);
  const float* x = ds.images.data<float>() + n * 3 * 32 * 32;  // [3, 32, 32]
  int wrong = 0;
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int xx = 0; xx < 32; ++xx)
        if (x[(c * 32 + y) * 32 + xx] != static_cast<float>(pixel(seed, c, y, xx)) / 255.0f)
          ++wrong;
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("CIFAR-10 records read back as NCHW with the R G B planes in order", "[data][cifar]") {
  ScratchDir dir("cifar");
  const std::string path = dir.write("data_batch_1.bin", batch({3, 0, 9}, 0));
  const ImageDataset ds = read_cifar10({path});
  REQUIRE(ds.images.sizes() == Shape{3, 3, 32, 32});
  REQUIRE(ds.labels.sizes() == Shape{3});
  CHECK(ds.images.dtype() == DType::f32);
  CHECK(ds.labels.dtype() == DType::i64);
  CHECK(ds.num_classes == 10);
  CHECK(ds.size() == 3);
  CHECK(ds.source == path);
  check_image(ds, 0, 0, 3);
  check_image(ds, 1, 1, 0);
  check_image(ds, 2, 2, 9);
  // Spot checks by hand: record 1, green (c = 1), row 2, column 5 is 31 + 85 + 14 + 15 = 145.
  CHECK(ds.images.data<float>()[((1 * 3 + 1) * 32 + 2) * 32 + 5] == 145.0f / 255.0f);
  // Record 2, blue, row 31, column 31: 62 + 170 + 217 + 93 = 542 = 30 (mod 256).
  CHECK(ds.images.data<float>()[((2 * 3 + 2) * 32 + 31) * 32 + 31] == 30.0f / 255.0f);
}

TEST_CASE("parse_cifar10 in memory equals reading the file", "[data][cifar]") {
  const Bytes b = batch({1, 2, 3, 4}, 10);
  const ImageDataset ds = parse_cifar10(b.data(), b.size(), "mem");
  REQUIRE(ds.images.sizes() == Shape{4, 3, 32, 32});
  CHECK(ds.source == "mem");
  for (int i = 0; i < 4; ++i) check_image(ds, i, 10 + i, i + 1);
}

TEST_CASE("read_cifar10 concatenates batches in the order given", "[data][cifar]") {
  ScratchDir dir("cifar");
  const std::string a = dir.write("a.bin", batch({5, 6}, 100));
  const std::string b = dir.write("b.bin", batch({7}, 200));
  const ImageDataset ds = read_cifar10({b, a});
  REQUIRE(ds.images.sizes() == Shape{3, 3, 32, 32});
  check_image(ds, 0, 200, 7);
  check_image(ds, 1, 100, 5);
  check_image(ds, 2, 101, 6);
  CHECK(ds.source == b + ", " + a);
}

TEST_CASE("read_cifar10_dir reads data_batch_1..5 for train and test_batch for test",
          "[data][cifar]") {
  ScratchDir dir("cifar");
  for (int i = 1; i <= 5; ++i)
    dir.write("data_batch_" + std::to_string(i) + ".bin", batch({static_cast<std::uint8_t>(i)}, i));
  dir.write("test_batch.bin", batch({0, 8}, 50));
  const ImageDataset train = read_cifar10_dir(dir.path().string(), "train");
  REQUIRE(train.labels.sizes() == Shape{5});
  for (int i = 0; i < 5; ++i) check_image(train, i, i + 1, i + 1);
  const ImageDataset test = read_cifar10_dir(dir.path().string(), "test");
  REQUIRE(test.labels.sizes() == Shape{2});
  check_image(test, 1, 51, 8);

  // The folder the archive extracts to, cifar-10-batches-bin/, is found below the given one.
  ScratchDir outer("cifar");
  outer.write("cifar-10-batches-bin/test_batch.bin", batch({4}, 7));
  const ImageDataset nested = read_cifar10_dir(outer.path().string(), "test");
  check_image(nested, 0, 7, 4);
}

// ---- malformed files: one test case per kind
// -------------------------------------------------------

TEST_CASE("CIFAR malformed: empty file", "[data][cifar][malformed]") {
  ScratchDir dir("cifar");
  const std::string path = dir.write("empty.bin", Bytes{});
  REQUIRE_THROWS_WITH(read_cifar10({path}),
                      Contains("read_cifar10: " + path + ": is empty (0 bytes"));
  REQUIRE_THROWS_WITH(parse_cifar10(nullptr, 0, "mem"), Contains("parse_cifar10: mem: is empty"));
}

TEST_CASE("CIFAR malformed: size not a multiple of the 3073-byte record",
          "[data][cifar][malformed]") {
  ScratchDir dir("cifar");
  Bytes b = batch({1, 2}, 0);
  b.resize(b.size() + 100, 0);
  const std::string path = dir.write("long.bin", b);
  REQUIRE_THROWS_WITH(
      read_cifar10({path}),
      Contains(path + ": has 6246 bytes, not a multiple of the 3073-byte CIFAR-10 record") &&
          Contains("2 whole records and 100 bytes left over (truncated?)"));
  b = batch({1, 2}, 0);
  b.resize(b.size() - 1);
  const std::string cut = dir.write("cut.bin", b);
  REQUIRE_THROWS_WITH(read_cifar10({cut}),
                      Contains(cut) && Contains("1 whole records and 3072 bytes left over"));
}

TEST_CASE("CIFAR malformed: a CIFAR-100 file (2 label bytes per record)",
          "[data][cifar][malformed]") {
  ScratchDir dir("cifar");
  const std::string path = dir.write("train.bin", Bytes(3074 * 3, 1));
  REQUIRE_THROWS_WITH(read_cifar10({path}),
                      Contains(path) && Contains("a multiple of 3074: a CIFAR-100 file?"));
}

TEST_CASE("CIFAR malformed: label above 9", "[data][cifar][malformed]") {
  ScratchDir dir("cifar");
  const std::string path = dir.write("data_batch_1.bin", batch({1, 10, 2}, 0));
  REQUIRE_THROWS_WITH(
      read_cifar10({path}),
      Contains(path + ": record 1 (byte offset 3073) has label 10, outside [0, 10)"));
}

TEST_CASE("CIFAR malformed: gzip-compressed batch", "[data][cifar][malformed]") {
  ScratchDir dir("cifar");
  Bytes b = batch({1}, 0);
  b[0] = 0x1f;
  b[1] = 0x8b;
  const std::string path = dir.write("cifar-10-binary.tar.gz", b);
  REQUIRE_THROWS_WITH(read_cifar10({path}), Contains(path) && Contains("is gzip-compressed") &&
                                                Contains("extract cifar-10-binary.tar.gz"));
}

TEST_CASE("CIFAR malformed: missing file or a directory or an empty list",
          "[data][cifar][malformed]") {
  ScratchDir dir("cifar");
  const std::string good = dir.write("good.bin", batch({1}, 0));
  const std::string missing = (dir.path() / "data_batch_9.bin").string();
  REQUIRE_THROWS_WITH(read_cifar10({good, missing}), Contains(missing + ": no such file"));
  REQUIRE_THROWS_WITH(read_cifar10({dir.path().string()}), Contains("is a directory, not a file"));
  REQUIRE_THROWS_WITH(read_cifar10({}), Contains("read_cifar10: no batch files given"));
}

TEST_CASE("CIFAR malformed: read_cifar10_dir with an unknown split or a missing batch",
          "[data][cifar][malformed]") {
  ScratchDir dir("cifar");
  for (int i = 1; i <= 4; ++i) dir.write("data_batch_" + std::to_string(i) + ".bin", batch({1}, i));
  REQUIRE_THROWS_WITH(read_cifar10_dir(dir.path().string(), "t10k"),
                      Contains("unknown split 't10k' (expected \"train\" or \"test\")"));
  REQUIRE_THROWS_WITH(
      read_cifar10_dir(dir.path().string(), "train"),
      Contains("has no data_batch_5.bin") && Contains("data_batch_1.bin .. data_batch_5.bin"));
  REQUIRE_THROWS_WITH(read_cifar10_dir(dir.path().string(), "test"),
                      Contains("has no test_batch.bin"));
  const std::string missing = (dir.path() / "nothing").string();
  REQUIRE_THROWS_WITH(read_cifar10_dir(missing, "test"), Contains(missing + ": no such directory"));
}

TEST_CASE("CIFAR malformed: a bad batch among good ones fails before anything is read",
          "[data][cifar][malformed]") {
  ScratchDir dir("cifar");
  const std::string a = dir.write("a.bin", batch({1, 2}, 0));
  Bytes b = batch({3}, 0);
  b.pop_back();
  const std::string bad = dir.write("b.bin", b);
  REQUIRE_THROWS_WITH(read_cifar10({a, bad}), Contains(bad + ": has 3072 bytes"));
}
