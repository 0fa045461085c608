// SPDX-License-Identifier: Apache-2.0
// Every reader is bounded (Note [Bounded file reads] in data/file_bytes.cpp, Note [Bounded
// gunzip] in data/idx.cpp): gzip bombs generated here with zlib are stopped at the caller's
// limit while inflating, and a FIFO (made with mkfifo), /dev/zero and a directory are refused
// by the IDX, CIFAR, IMDB and PTB readers and by the safetensors/checkpoint reader, without
// blocking and without reading.
#include <sys/stat.h>
#include <zlib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <fcntl.h>
#include <functional>
#include <thread>
#include <unistd.h>

#include "data/cifar.h"
#include "data/idx.h"
#include "data/imdb.h"
#include "data/ptb.h"
#include "anvil/anvil.h"
#include "engine/core/process_stats.h"
#include "helpers/datasets.h"

using namespace anvil;
using namespace anvil::data;
using anvil::test::ScratchDir;
using Catch::Contains;
using Bytes = std::vector<std::uint8_t>;

namespace {

Bytes idx_header(const std::vector<std::uint32_t>& dims) {
  Bytes b = {0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(d >> s));
  return b;
}

// A real gzip stream (zlib, level 9) of `head` followed by `zeros` zero bytes, compressed in
// 1 MiB pieces (the bomb never exists uncompressed): 64 MiB of zeros become ~64 KB.
Bytes gzip_bomb(const Bytes& head, std::uint64_t zeros) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  Bytes out;
  Bytes chunk(1 << 16);
  const auto feed = [&](const std::uint8_t* p, std::size_t n, int flush) {
    zs.next_in = const_cast<Bytef*>(p);
    zs.avail_in = static_cast<uInt>(n);
    do {
      zs.next_out = chunk.data();
      zs.avail_out = static_cast<uInt>(chunk.size());
      const int r = deflate(&zs, flush);
      REQUIRE(r != Z_STREAM_ERROR);
      out.insert(out.end(), chunk.data(), chunk.data() + (chunk.size() - zs.avail_out));
    } while (zs.avail_out == 0);
  };
  feed(head.data(), head.size(), Z_NO_FLUSH);
  const Bytes mib(1 << 20, 0);
  for (std::uint64_t left = zeros; left > 0;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, mib.size()));
    left -= n;
    feed(mib.data(), n, left == 0 ? Z_FINISH : Z_NO_FLUSH);
  }
  if (zeros == 0) feed(nullptr, 0, Z_FINISH);
  deflateEnd(&zs);
  return out;
}

// Runs `read`, which must throw an anvil::Error matching `matcher`, within `seconds` and with
// the resident memory growing by less than `max_growth_mb`.
template <typename Matcher>
void refused_quickly(const std::function<void()>& read, const Matcher& matcher,
                     double max_growth_mb = 64.0, double seconds = 5.0) {
  reset_peak_rss();
  const double rss0 = current_rss_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(read(), matcher);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double growth_mb = (peak_rss_bytes() - rss0) / (1024.0 * 1024.0);
  INFO("took " << dt << " s, peak RSS grew by " << growth_mb << " MB");
  CHECK(dt < seconds);
  CHECK(growth_mb < max_growth_mb);
}

// A FIFO in `dir`. A watchdog opens it for writing after 5 s (and closes it at once), so a
// reader that blocks in open() or read() returns instead of hanging the test.
struct Fifo {
  std::string path;
  std::thread watchdog;
  std::atomic<bool> done{false};
  explicit Fifo(const ScratchDir& dir, const std::string& name)
      : path((dir.path() / name).string()) {
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    watchdog = std::thread([this] {
      for (int i = 0; i < 50 && !done; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (done) return;
      const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    });
  }
  ~Fifo() {
    done = true;
    watchdog.join();
  }
};

}  // namespace

TEST_CASE("gzip IDX: a bomb behind a header declaring more than the limit stops at the header",
          "[data][bounded][idx]") {
  ScratchDir dir("bounded");
  // 1 x 32768 x 32769 bytes (just over the 1 GiB default), then 64 MiB of zeros.
  const std::string path =
      dir.write("bomb-idx3-ubyte.gz", gzip_bomb(idx_header({1, 32768, 32769}), 64ull << 20));
  refused_quickly([&] { read_idx(path); },
                  Contains(path) && Contains("more than the limit of 1073741824 bytes"));
}

TEST_CASE("gzip IDX: a bomb behind a header within the limit stops at the declared size",
          "[data][bounded][idx]") {
  ScratchDir dir("bounded");
  // Declares 8 x 1024 x 1024 = 8 MiB, holds 64 MiB: inflating stops after 8 MiB + 1 byte.
  const Bytes bomb = gzip_bomb(idx_header({8, 1024, 1024}), 64ull << 20);
  INFO("bomb is " << bomb.size() << " bytes");
  CHECK(bomb.size() < 1024 * 1024);
  const std::string path = dir.write("bomb-idx3-ubyte.gz", bomb);
  refused_quickly([&] { read_idx(path); }, Contains(path) && Contains("the gzip stream holds more"),
                  48.0);
}

TEST_CASE("gzip IDX: the caller's limit is checked while inflating", "[data][bounded][idx]") {
  ScratchDir dir("bounded");
  const Bytes ok = gzip_bomb(idx_header({4, 1024, 1024}), 4ull << 20);  // a valid 4 MiB array
  const std::string path = dir.write("four-idx3-ubyte.gz", ok);
  CHECK(read_idx(path).data.size() == (4u << 20));
  // A limit below the declared size: refused when the header is out.
  CHECK_THROWS_WITH(read_idx(path, IdxOptions{1 << 20}),
                    Contains(path) && Contains("more than the limit of 1048576 bytes"));
  // A limit below the header's own 16 bytes: refused after at most limit + 1 inflated bytes.
  CHECK_THROWS_WITH(decode_idx(ok.data(), ok.size(), path, IdxOptions{10}),
                    Contains(path) && Contains("decompresses to more than the limit of 10 bytes"));
  // The raw file is held to the same limit, by its size, before it is read.
  Bytes raw = idx_header({4, 1024, 1024});
  raw.resize(raw.size() + (4u << 20), 0);
  const std::string raw_path = dir.write("four-idx3-ubyte", raw);
  CHECK_THROWS_WITH(read_idx(raw_path, IdxOptions{1 << 20}),
                    Contains(raw_path) && Contains("more than this reader's limit of 1048576"));
  CHECK_THROWS_WITH(read_idx(raw_path, IdxOptions{0}), Contains("IdxOptions::max_bytes must be"));
}

TEST_CASE("readers refuse a FIFO without blocking", "[data][bounded]") {
  ScratchDir dir("bounded");
  Fifo idx(dir, "train-images-idx3-ubyte");
  refused_quickly([&] { read_idx(idx.path); }, Contains(idx.path) && Contains("a FIFO"), 64, 3);
  refused_quickly([&] { read_cifar10({idx.path}); }, Contains(idx.path) && Contains("regular"), 64,
                  3);
  refused_quickly([&] { read_imdb(idx.path, idx.path); }, Contains(idx.path) && Contains("a FIFO"),
                  64, 3);
  const Vocabulary vocab({"<eos>", "a"});
  refused_quickly([&] { read_ptb_ids(idx.path, vocab); }, Contains(idx.path) && Contains("a FIFO"),
                  64, 3);
  refused_quickly([&] { Vocabulary::build(idx.path); }, Contains(idx.path) && Contains("a FIFO"),
                  64, 3);
  refused_quickly([&] { load_safetensors(idx.path); }, Contains(idx.path) && Contains("a FIFO"), 64,
                  3);
}

TEST_CASE("readers refuse /dev/zero (a device that never ends)", "[data][bounded]") {
  const std::string zero = "/dev/zero";
  // (The parts of a combined matcher must outlive it.)
  const auto named = Contains(zero);
  const auto chr = Contains("a character device");
  const auto device = named && chr;
  refused_quickly([&] { read_idx(zero); }, device);
  refused_quickly([&] { read_mnist(zero, zero); }, device);
  refused_quickly([&] { read_cifar10({zero}); }, Contains(zero) && Contains("regular file"));
  refused_quickly([&] { read_imdb(zero, zero); }, device);
  refused_quickly([&] { read_imdb_word_index(zero); }, device);
  const Vocabulary vocab({"<eos>", "a"});
  refused_quickly([&] { read_ptb_ids(zero, vocab); }, device);
  refused_quickly([&] { read_ptb_words(zero); }, device);
  refused_quickly([&] { Vocabulary::load(zero); }, device);
  refused_quickly([&] { load_safetensors(zero); }, device);
  refused_quickly([&] { optim::read_checkpoint_info(zero); }, device);
}

TEST_CASE("readers refuse a directory", "[data][bounded]") {
  ScratchDir dir("bounded");
  const std::string d = dir.path().string();
  const auto named = Contains(d);
  const auto directory = Contains("is a directory");
  const auto is_dir = named && directory;
  CHECK_THROWS_WITH(read_idx(d), is_dir);
  CHECK_THROWS_WITH(read_cifar10({d}), is_dir);
  CHECK_THROWS_WITH(read_imdb(d, d), is_dir);
  CHECK_THROWS_WITH(read_ptb_ids(d, Vocabulary({"<eos>"})), is_dir);
  CHECK_THROWS_WITH(Vocabulary::load(d), is_dir);
  CHECK_THROWS_WITH(load_safetensors(d), is_dir);
}
