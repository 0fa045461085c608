// SPDX-License-Identifier: Apache-2.0
// IDX / MNIST-format reader: the real Fashion-MNIST files (values checked against an independent
// Python reading), generated files read back (raw and gzipped), and a corpus of malformed files,
// one test case per kind, each rejected with a message naming the file and the problem.
//
// Malformed files are generated at run time into a scratch folder (helpers/datasets.h), so each
// test shows the exact bytes it feeds; gzip files are written with stored (uncompressed) deflate
// blocks by gzip_stored() below, or cut from the real .gz files. docs/data.md lists the corpus.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/idx.h"
#include "helpers/datasets.h"

using namespace anvil;
using namespace anvil::data;
using anvil::test::fashion_mnist_dir;
using anvil::test::fashion_mnist_file;
using anvil::test::ScratchDir;
using Catch::Contains;
using Bytes = std::vector<std::uint8_t>;

namespace {

// An IDX file: magic 00 00 <type> <ndims>, big-endian sizes, payload.
Bytes idx_bytes(std::uint8_t type, const std::vector<std::uint32_t>& dims, const Bytes& payload) {
  Bytes b = {0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (const std::uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(d >> s));
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

Bytes iota_bytes(std::size_t n, std::uint8_t start = 0, std::uint8_t step = 1) {
  Bytes b(n);
  std::uint8_t v = start;
  for (auto& x : b) {
    x = v;
    v = static_cast<std::uint8_t>(v + step);
  }
  return b;
}

std::uint32_t crc32(const Bytes& data) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (const std::uint8_t byte : data) {
    c ^= byte;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void put_le(Bytes& out, std::uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

// A valid gzip file (RFC 1952) holding `data` in stored deflate blocks (RFC 1951 BTYPE 00): what
// gzip -d, Python and zlib read back exactly, without needing zlib in the test.
Bytes gzip_stored(const Bytes& data) {
  Bytes out = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};  // magic, deflate, no flags, mtime, xfl, OS
  std::size_t i = 0;
  do {
    const std::size_t n = std::min<std::size_t>(65535, data.size() - i);
    out.push_back(i + n == data.size() ? 1 : 0);  // BFINAL, BTYPE = 00
    put_le(out, static_cast<std::uint32_t>(n), 2);
    put_le(out, static_cast<std::uint32_t>(~n & 0xFFFF), 2);
    out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(i),
               data.begin() + static_cast<std::ptrdiff_t>(i + n));
    i += n;
  } while (i < data.size());
  put_le(out, crc32(data), 4);
  put_le(out, static_cast<std::uint32_t>(data.size()), 4);
  return out;
}

Bytes file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Pixel bytes back from the [0, 1] floats (exact: byte / 255 rounds back to the byte).
std::int64_t byte_at(const Tensor& images, std::int64_t i) {
  return std::lround(images.data<float>()[i] * 255.0f);
}

// A small valid MNIST-format pair (3 images of 2 x 4, labels 7 0 9) in `dir`.
struct SmallMnist {
  std::string images, labels;
};
SmallMnist write_small_mnist(const ScratchDir& dir, const std::string& prefix = "small") {
  return {
      dir.write(prefix + "-images-idx3-ubyte", idx_bytes(0x08, {3, 2, 4}, iota_bytes(24, 0, 11))),
      dir.write(prefix + "-labels-idx1-ubyte", idx_bytes(0x08, {3}, {7, 0, 9}))};
}

}  // namespace

// ---- real files: Fashion-MNIST ------------------------------------------------------------------
//
// Expected values from Python's gzip module, independently of this reader:
//   python3 -c "import gzip,collections as c; d='/usr/share/datasets/fashion-mnist/';
//     x=gzip.open(d+'train-images-idx3-ubyte.gz').read();
//     y=gzip.open(d+'train-labels-idx1-ubyte.gz').read();
//     print(len(x),len(y),list(y[8:18]),sum(x[16:16+784]),sum(x[16:]),sorted(c.Counter(y[8:]).items()))"
// (the same with t10k- for the test split):
//   train: 47040016 60008 [9, 0, 0, 3, 0, 2, 7, 2, 5, 5] 76247 3431114169 [(0, 6000) ... (9, 6000)]
//   t10k:  7840016 10008 [9, 2, 1, 1, 6, 1, 4, 6, 5, 7] 33456 573469082 [(0, 1000) ... (9, 1000)]

namespace {

void check_fashion_split(const ImageDataset& ds, std::int64_t n,
                         const std::vector<std::int64_t>& first10, std::int64_t first_image_sum,
                         std::int64_t all_pixels_sum) {
  REQUIRE(ds.images.sizes() == Shape{n, 1, 28, 28});
  REQUIRE(ds.labels.sizes() == Shape{n});
  CHECK(ds.images.dtype() == DType::f32);
  CHECK(ds.labels.dtype() == DType::i64);
  CHECK(ds.num_classes == 10);
  CHECK(ds.size() == n);
  const std::int64_t* y = ds.labels.data<std::int64_t>();
  CHECK(std::vector<std::int64_t>(y, y + 10) == first10);
  std::vector<std::int64_t> histogram(10, 0);
  std::int64_t out_of_range = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (y[i] < 0 || y[i] >= 10)
      ++out_of_range;
    else
      ++histogram[static_cast<std::size_t>(y[i])];
  }
  CHECK(out_of_range == 0);
  CHECK(histogram == std::vector<std::int64_t>(10, n / 10));
  std::int64_t first = 0, all = 0;
  const float* x = ds.images.data<float>();
  for (std::int64_t i = 0; i < 784; ++i) first += std::lround(x[i] * 255.0f);
  for (std::int64_t i = 0; i < ds.images.numel(); ++i) all += std::lround(x[i] * 255.0f);
  CHECK(first == first_image_sum);
  CHECK(all == all_pixels_sum);
  const auto [lo, hi] = std::minmax_element(x, x + ds.images.numel());
  CHECK(*lo == 0.0f);
  CHECK(*hi == 1.0f);
}

}  // namespace

TEST_CASE("Fashion-MNIST train split: counts labels pixel sums and class histogram",
          "[data][idx][mnist]") {
  const ImageDataset ds = read_mnist(fashion_mnist_file("train-images-idx3-ubyte.gz"),
                                     fashion_mnist_file("train-labels-idx1-ubyte.gz"));
  check_fashion_split(ds, 60000, {9, 0, 0, 3, 0, 2, 7, 2, 5, 5}, 76247, 3431114169LL);
  CHECK_THAT(ds.source,
             Contains("train-images-idx3-ubyte.gz") && Contains("train-labels-idx1-ubyte.gz"));
}

TEST_CASE("Fashion-MNIST test split through read_mnist_dir (test and t10k)", "[data][idx][mnist]") {
  fashion_mnist_file("t10k-images-idx3-ubyte.gz");  // REQUIREs the files, saying where it looked
  fashion_mnist_file("t10k-labels-idx1-ubyte.gz");
  const ImageDataset ds = read_mnist_dir(fashion_mnist_dir(), "test");
  check_fashion_split(ds, 10000, {9, 2, 1, 1, 6, 1, 4, 6, 5, 7}, 33456, 573469082LL);
  const ImageDataset again = read_mnist_dir(fashion_mnist_dir(), "t10k");
  CHECK(again.labels.sizes() == Shape{10000});
  CHECK(std::equal(again.images.data<float>(), again.images.data<float>() + again.images.numel(),
                   ds.images.data<float>()));
}

TEST_CASE("read_idx reads a real gzipped labels file as a 1-D unsigned-byte array", "[data][idx]") {
  const IdxArray a = read_idx(fashion_mnist_file("train-labels-idx1-ubyte.gz"));
  CHECK(a.type_code == 0x08);
  CHECK(a.dims == std::vector<std::int64_t>{60000});
  REQUIRE(a.data.size() == 60000);
  CHECK(Bytes(a.data.begin(), a.data.begin() + 10) == Bytes{9, 0, 0, 3, 0, 2, 7, 2, 5, 5});
}

// ---- generated files
// -----------------------------------------------------------------------------

TEST_CASE("IDX round trip: raw and gzipped files and memory give the same array", "[data][idx]") {
  ScratchDir dir("idx");
  const Bytes payload = iota_bytes(2 * 3 * 5, 250, 3);  // wraps around 255
  const Bytes raw = idx_bytes(0x08, {2, 3, 5}, payload);
  const IdxArray mem = parse_idx(raw.data(), raw.size(), "mem");
  CHECK(mem.type_code == 0x08);
  CHECK(mem.dims == std::vector<std::int64_t>{2, 3, 5});
  CHECK(mem.data == payload);
  const IdxArray from_raw = read_idx(dir.write("a-idx3-ubyte", raw));
  const IdxArray from_gz = read_idx(dir.write("a-idx3-ubyte.gz", gzip_stored(raw)));
  CHECK(from_raw.dims == mem.dims);
  CHECK(from_raw.data == payload);
  CHECK(from_gz.dims == mem.dims);
  CHECK(from_gz.data == payload);
  const Bytes gz = gzip_stored(raw);
  CHECK(decode_idx(gz.data(), gz.size(), "x.gz").data == payload);
  CHECK(decode_idx(raw.data(), raw.size(), "x").data == payload);

  // Two concatenated gzip members are one stream (gzip -d and Python read them so).
  Bytes two = gzip_stored(Bytes(raw.begin(), raw.begin() + 10));
  const Bytes second = gzip_stored(Bytes(raw.begin() + 10, raw.end()));
  two.insert(two.end(), second.begin(), second.end());
  CHECK(read_idx(dir.write("two-members.gz", two)).data == payload);

  // A payload larger than one 64 KiB output chunk (the growing gunzip buffer).
  const Bytes big = idx_bytes(0x08, {3, 200, 300}, iota_bytes(3 * 200 * 300, 1, 7));
  const IdxArray b = read_idx(dir.write("big.gz", gzip_stored(big)));
  CHECK(b.dims == std::vector<std::int64_t>{3, 200, 300});
  CHECK(b.data == Bytes(big.begin() + 16, big.end()));
}

TEST_CASE("read_mnist scales bytes to 0..1 in NCHW with one channel", "[data][idx][mnist]") {
  ScratchDir dir("idx");
  const SmallMnist f = write_small_mnist(dir);
  const ImageDataset ds = read_mnist(f.images, f.labels);
  REQUIRE(ds.images.sizes() == Shape{3, 1, 2, 4});
  CHECK(ds.labels.sizes() == Shape{3});
  const std::int64_t* y = ds.labels.data<std::int64_t>();
  CHECK(std::vector<std::int64_t>(y, y + 3) == std::vector<std::int64_t>{7, 0, 9});
  const float* x = ds.images.data<float>();
  for (std::int64_t i = 0; i < 24; ++i) {
    const auto b = static_cast<std::uint8_t>(11 * i);  // iota_bytes(24, 0, 11)
    CHECK(x[i] == static_cast<float>(b) / 255.0f);
    CHECK(byte_at(ds.images, i) == b);
  }
  // image 1, row 1, col 2 = byte 1*8 + 1*4 + 2 = 14 of the payload
  CHECK(x[14] == static_cast<float>(static_cast<std::uint8_t>(11 * 14)) / 255.0f);
  CHECK(ds.num_classes == 10);
  CHECK_THAT(ds.source, Contains("small-images-idx3-ubyte") && Contains("small-labels-idx1-ubyte"));
}

TEST_CASE("read_mnist_dir takes the uncompressed file when both exist and else the .gz",
          "[data][idx][mnist]") {
  ScratchDir dir("idx");
  const Bytes images = idx_bytes(0x08, {2, 1, 1}, {0, 255});
  dir.write("train-images-idx3-ubyte.gz", gzip_stored(images));
  dir.write("train-labels-idx1-ubyte.gz", gzip_stored(idx_bytes(0x08, {2}, {1, 2})));
  dir.write("train-labels-idx1-ubyte", idx_bytes(0x08, {2}, {3, 4}));
  const ImageDataset ds = read_mnist_dir(dir.path().string(), "train");
  CHECK(ds.labels.data<std::int64_t>()[0] == 3);  // the uncompressed labels
  CHECK(ds.images.data<float>()[1] == 1.0f);      // the gzipped images
  CHECK_THAT(ds.source,
             Contains("train-images-idx3-ubyte.gz") && Catch::EndsWith("train-labels-idx1-ubyte"));
}

// ---- malformed files: one test case per kind
// -------------------------------------------------------

TEST_CASE("IDX malformed: missing file", "[data][idx][malformed]") {
  ScratchDir dir("idx");
  const std::string path = (dir.path() / "nope-idx3-ubyte").string();
  REQUIRE_THROWS_WITH(read_idx(path),
                      Contains("read_idx: ") && Contains(path) && Contains("no such file"));
  REQUIRE_THROWS_WITH(read_mnist(path, path), Contains("read_mnist: ") && Contains("no such file"));
}

TEST_CASE("IDX malformed: a directory instead of a file", "[data][idx][malformed]") {
  ScratchDir dir("idx");
  REQUIRE_THROWS_WITH(read_idx(dir.path().string()),
                      Contains(dir.path().string()) && Contains("is a directory"));
}

TEST_CASE("IDX malformed: empty file", "[data][idx][malformed]") {
  ScratchDir dir("idx");
  const std::string raw = dir.write("empty-idx1-ubyte", Bytes{});
  const std::string gz = dir.write("empty-idx1-ubyte.gz", Bytes{});
  REQUIRE_THROWS_WITH(read_idx(raw), Contains(raw) && Contains("is empty (0 bytes)"));
  REQUIRE_THROWS_WITH(read_idx(gz), Contains(gz) && Contains("is empty (0 bytes)"));
}

TEST_CASE("IDX malformed: shorter than the 4-byte magic", "[data][idx][malformed]") {
  ScratchDir dir("idx");
  const std::string path = dir.write("short", Bytes{0, 0, 8});
  REQUIRE_THROWS_WITH(read_idx(path),
                      Contains(path) && Contains("too short for an IDX header (3 bytes"));
}

TEST_CASE("IDX malformed: bad magic number", "[data][idx][malformed]") {
  ScratchDir dir("idx");
  Bytes b = idx_bytes(0x08, {1}, {0});
  b[0] = 0x50;  // e.g. a PNG or text file
  b[1] = 0x4b;
  const std::string path = dir.write("magic-idx1-ubyte", b);
  REQUIRE_THROWS_WITH(read_idx(path), Contains(path) && Contains("bad magic number 50 4b 08 01"));
}

TEST_CASE("IDX malformed: element type other than unsigned byte", "[data][idx][malformed]") {
  ScratchDir dir("idx");
  const std::string f32 = dir.write("float-idx1", idx_bytes(0x0D, {1}, {0, 0, 0, 0}));
  REQUIRE_THROWS_WITH(read_idx(f32), Contains(f32) &&
                                         Contains("element type 0x0d (float32) is not supported") &&
                                         Contains("only 0x08 (unsigned byte)"));
  const std::string unknown = dir.write("unknown-idx1", idx_bytes(0x42, {1}, {0}));
  REQUIRE_THROWS_WITH(read_idx(unknown),
                      Contains(unknown) && Contains("unknown element type 0x42"));
}

TEST_CASE("IDX malformed: zero dimensions", "[data][idx][malformed]") {
  ScratchDir dir("idx");
  const std::string path = dir.write("scalar-idx0", idx_bytes(0x08, {}, {5}));
  REQUIRE_THROWS_WITH(read_idx(path), Contains(path) && Contains("declares 0 dimensions"));
}

TEST_CASE("IDX malformed: header cut inside the sizes", "[data][idx][malformed]") {
  ScratchDir dir("idx");
  Bytes b = idx_bytes(0x08, {60000, 28, 28}, {});
  b.resize(9);
  const std::string path = dir.write("cut-idx3-ubyte", b);
  REQUIRE_THROWS_WITH(read_idx(path),
                      Contains(path) && Contains("truncated in its header") &&
                          Contains("declares 3 dimensions (a 16-byte header), file has 9 bytes"));
}

TEST_CASE("IDX malformed: truncated payload", "[data][idx][malformed]") {
  ScratchDir dir("idx");
  const std::string path =
      dir.write("train-images-idx3-ubyte", idx_bytes(0x08, {60000, 28, 28}, iota_bytes(1234)));
  REQUIRE_THROWS_WITH(read_idx(path),
                      Contains("read_idx: " + path +
                               ": declares 60000 x 28 x 28 = 47040000 bytes of data, "
                               "file has 1234 (truncated)"));
  const Bytes b = file_bytes(path);
  REQUIRE_THROWS_WITH(parse_idx(b.data(), b.size(), "mem"),
                      Contains("parse_idx: mem: declares 60000 x 28 x 28 = 47040000 bytes"));
}

TEST_CASE("IDX malformed: bytes after the declared payload", "[data][idx][malformed]") {
  ScratchDir dir("idx");
  const std::string path = dir.write("long-idx1-ubyte", idx_bytes(0x08, {3}, {1, 2, 3, 4, 5}));
  REQUIRE_THROWS_WITH(read_idx(path), Contains(path) &&
                                          Contains("declares 3 = 3 bytes of data, file has 5") &&
                                          Contains("2 bytes after the data"));
}

TEST_CASE("IDX malformed: sizes whose product overflows 64 bits", "[data][idx][malformed]") {
  ScratchDir dir("idx");
  const std::string path =
      dir.write("huge-idx3-ubyte", idx_bytes(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, {}));
  REQUIRE_THROWS_WITH(read_idx(path), Contains(path) &&
                                          Contains("4294967295 x 4294967295 x 4294967295") &&
                                          Contains("overflows 64 bits"));
}

TEST_CASE("IDX malformed: absurd sizes are rejected before any allocation",
          "[data][idx][malformed]") {
  ScratchDir dir("idx");
  // 2^20 x 2^20 x 2 = 2 TiB declared by a 16-byte file.
  const std::string path =
      dir.write("absurd-idx3-ubyte", idx_bytes(0x08, {1u << 20, 1u << 20, 2}, {}));
  REQUIRE_THROWS_WITH(
      read_idx(path),
      Contains(path) && Contains("= 2199023255552 bytes of data, more than the limit of "
                                 "1073741824 bytes (IdxOptions::max_bytes"));
  // Under a raised limit (the largest allowed, 1 TiB) it is an ordinary truncation (nothing of
  // that size is allocated either).
  const IdxOptions tib{kMaxIdxMaxBytes};
  const std::string big =
      dir.write("big-idx3-ubyte", idx_bytes(0x08, {1u << 20, 1u << 19, 1}, {1, 2}));
  REQUIRE_THROWS_WITH(read_idx(big, tib),
                      Contains("= 549755813888 bytes of data, file has 2 (truncated)"));
  // The same header gzipped: the gunzip buffer stays small and the payload is reported short.
  const std::string gz =
      dir.write("big-idx3-ubyte.gz", gzip_stored(idx_bytes(0x08, {1u << 20, 1u << 19, 1}, {1, 2})));
  REQUIRE_THROWS_WITH(read_idx(gz, tib),
                      Contains(gz) && Contains("gunzipped data has 2 (truncated)"));
}

TEST_CASE("IDX malformed: gzip data under a raw name", "[data][idx][malformed]") {
  ScratchDir dir("idx");
  const std::string path = dir.write("train-labels-idx1-ubyte",
                                     file_bytes(fashion_mnist_file("train-labels-idx1-ubyte.gz")));
  REQUIRE_THROWS_WITH(read_idx(path), Contains(path) && Contains("is gzip-compressed") &&
                                          Contains("its name must end in .gz"));
}

TEST_CASE("IDX malformed: a .gz name on data that is not gzip", "[data][idx][malformed]") {
  ScratchDir dir("idx");
  const std::string path = dir.write("labels-idx1-ubyte.gz", idx_bytes(0x08, {2}, {1, 2}));
  REQUIRE_THROWS_WITH(
      read_idx(path),
      Contains(path) && Contains("is not gzip-compressed (it starts with 00 00 08 01"));
}

TEST_CASE("IDX malformed: truncated gzip stream", "[data][idx][malformed]") {
  ScratchDir dir("idx");
  Bytes b = file_bytes(fashion_mnist_file("train-labels-idx1-ubyte.gz"));
  b.resize(b.size() / 2);
  const std::string path = dir.write("half-labels-idx1-ubyte.gz", b);
  REQUIRE_THROWS_WITH(read_idx(path), Contains(path) && Contains("truncated gzip data"));
  // Cut inside the 8-byte trailer (CRC and size): the data is complete but unverified.
  Bytes t = gzip_stored(idx_bytes(0x08, {2}, {1, 2}));
  t.resize(t.size() - 3);
  const std::string trailer = dir.write("trailer.gz", t);
  REQUIRE_THROWS_WITH(read_idx(trailer), Contains(trailer) && Contains("truncated gzip data"));
}

TEST_CASE("IDX malformed: corrupt gzip data (CRC mismatch or bad deflate data or garbage after it)",
          "[data][idx][malformed]") {
  ScratchDir dir("idx");
  Bytes crc = gzip_stored(idx_bytes(0x08, {4}, {1, 2, 3, 4}));
  crc[crc.size() - 8] ^= 0xFF;  // the stored CRC-32
  const std::string a = dir.write("crc.gz", crc);
  REQUIRE_THROWS_WITH(read_idx(a), Contains(a) && Contains("corrupt gzip data") &&
                                       Contains("incorrect data check"));
  Bytes deflate = file_bytes(fashion_mnist_file("train-labels-idx1-ubyte.gz"));
  for (std::size_t i = 100; i < 140; ++i) deflate[i] = 0xFF;
  const std::string b = dir.write("garbled-idx1-ubyte.gz", deflate);
  REQUIRE_THROWS_WITH(read_idx(b), Contains(b) && Contains("corrupt gzip data"));
  Bytes tail = gzip_stored(idx_bytes(0x08, {4}, {1, 2, 3, 4}));
  tail.insert(tail.end(), {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  const std::string c = dir.write("tail.gz", tail);
  REQUIRE_THROWS_WITH(read_idx(c), Contains(c) && Contains("corrupt gzip data"));
}

TEST_CASE("IDX malformed: gzipped payload shorter than declared", "[data][idx][malformed]") {
  ScratchDir dir("idx");
  const std::string path =
      dir.write("short-idx3-ubyte.gz", gzip_stored(idx_bytes(0x08, {10, 28, 28}, iota_bytes(700))));
  REQUIRE_THROWS_WITH(read_idx(path),
                      Contains(path) && Contains("declares 10 x 28 x 28 = 7840 bytes of data, "
                                                 "gunzipped data has 700 (truncated)"));
}

TEST_CASE("IDX malformed: gzipped data longer than declared (stops at the declared size)",
          "[data][idx][malformed]") {
  ScratchDir dir("idx");
  // 16-byte header declaring 1000 bytes, then 5 MB: rejected after 1017 bytes are inflated.
  const std::string path = dir.write(
      "bomb-idx3-ubyte.gz", gzip_stored(idx_bytes(0x08, {10, 10, 10}, Bytes(5u << 20, 0))));
  REQUIRE_THROWS_WITH(
      read_idx(path),
      Contains(path) &&
          Contains("declares 10 x 10 x 10 = 1000 bytes of data, the gzip stream holds more"));
}

TEST_CASE("MNIST malformed: images file that is not 3-D", "[data][idx][mnist][malformed]") {
  ScratchDir dir("idx");
  const SmallMnist f = write_small_mnist(dir);
  // The labels file passed as images (a swapped pair of arguments).
  REQUIRE_THROWS_WITH(read_mnist(f.labels, f.labels),
                      Contains("read_mnist: " + f.labels + ": images must be 3-D") &&
                          Contains("declares 1 dimension [3]") && Contains("is it a labels file?"));
  const std::string flat = dir.write("flat-images", idx_bytes(0x08, {3, 8}, iota_bytes(24)));
  REQUIRE_THROWS_WITH(read_mnist(flat, f.labels),
                      Contains(flat) && Contains("declares 2 dimensions [3 x 8]"));
}

TEST_CASE("MNIST malformed: labels file that is not 1-D", "[data][idx][mnist][malformed]") {
  ScratchDir dir("idx");
  const SmallMnist f = write_small_mnist(dir);
  REQUIRE_THROWS_WITH(read_mnist(f.images, f.images),
                      Contains(f.images + ": labels must be 1-D") &&
                          Contains("declares 3 dimensions [3 x 2 x 4]") &&
                          Contains("is it an images file?"));
}

TEST_CASE("MNIST malformed: image and label counts differ", "[data][idx][mnist][malformed]") {
  ScratchDir dir("idx");
  const SmallMnist f = write_small_mnist(dir);
  const std::string labels = dir.write("four-labels", idx_bytes(0x08, {4}, {1, 2, 3, 4}));
  REQUIRE_THROWS_WITH(read_mnist(f.images, labels),
                      Contains(f.images + " holds 3 images but " + labels + " holds 4 labels"));
}

TEST_CASE("MNIST malformed: label of 10 or more", "[data][idx][mnist][malformed]") {
  ScratchDir dir("idx");
  const SmallMnist f = write_small_mnist(dir);
  const std::string labels = dir.write("bad-labels", idx_bytes(0x08, {3}, {1, 10, 3}));
  REQUIRE_THROWS_WITH(read_mnist(f.images, labels),
                      Contains(labels + ": label 10 at index 1 is outside [0, 10)"));
}

TEST_CASE("MNIST malformed: no images or empty images", "[data][idx][mnist][malformed]") {
  ScratchDir dir("idx");
  const std::string none = dir.write("none-images", idx_bytes(0x08, {0, 28, 28}, {}));
  const std::string no_labels = dir.write("none-labels", idx_bytes(0x08, {0}, {}));
  REQUIRE_THROWS_WITH(read_mnist(none, no_labels),
                      Contains(none) && Contains("holds no images (0 x 28 x 28)"));
  const std::string empty = dir.write("empty-images", idx_bytes(0x08, {2, 0, 28}, {}));
  const std::string two = dir.write("two-labels", idx_bytes(0x08, {2}, {1, 1}));
  REQUIRE_THROWS_WITH(read_mnist(empty, two),
                      Contains(empty) && Contains("empty images of 0 x 28 pixels"));
}

TEST_CASE(
    "MNIST malformed: read_mnist_dir with an unknown split or a missing folder or missing files",
    "[data][idx][mnist][malformed]") {
  ScratchDir dir("idx");
  REQUIRE_THROWS_WITH(
      read_mnist_dir(dir.path().string(), "valid"),
      Contains("unknown split 'valid'") && Contains("\"train\", \"t10k\" or \"test\""));
  const std::string missing = (dir.path() / "absent").string();
  REQUIRE_THROWS_WITH(read_mnist_dir(missing, "train"), Contains(missing + ": no such directory"));
  REQUIRE_THROWS_WITH(
      read_mnist_dir(dir.path().string(), "train"),
      Contains("has neither train-labels-idx1-ubyte nor train-labels-idx1-ubyte.gz"));
}

TEST_CASE("mnist_from_idx rejects an IdxArray whose data does not match its sizes",
          "[data][idx][mnist][malformed]") {
  IdxArray images{0x08, {2, 2, 2}, Bytes(7, 0)};
  IdxArray labels{0x08, {2}, {0, 1}};
  REQUIRE_THROWS_WITH(
      mnist_from_idx(images, labels, "imgs", "lbls"),
      Contains("mnist_from_idx: imgs: sizes 2 x 2 x 2 need 8 bytes, the array holds 7"));
}
