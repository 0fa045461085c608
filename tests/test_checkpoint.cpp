// SPDX-License-Identifier: Apache-2.0
// Checkpoints: the safetensors reader and writer (bit-exact round trips, the byte layout
// checked independently of our reader, a file written by the reference Python implementation,
// atomic replacement under SIGKILL, strict rejection of malformed files), optimizer state and
// resume equivalence (6 steps straight == 3 steps + save + load into fresh objects + 3 steps).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "anvil/anvil.h"
#include "engine/core/views.h"
#include "helpers/bytes.h"
#include "helpers/checkpoint_nets.h"
#include "helpers/datasets.h"

using namespace anvil;
namespace fs = std::filesystem;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() &&
         test::tensor_bytes(a) == test::tensor_bytes(b);
}

// A safetensors file from a header text and data bytes, built by hand (no anvil code).
std::string raw_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// Every model tensor (parameters, then buffers) and the optimizer's state, as bytes.
std::vector<std::pair<std::string, std::string>> snapshot(const nn::Module& m,
                                                          const optim::Optimizer* opt) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [n, t] : m.named_parameters()) out.emplace_back("p." + n, test::tensor_bytes(t));
  for (const auto& [n, t] : m.named_buffers()) out.emplace_back("b." + n, test::tensor_bytes(t));
  if (opt)
    for (const auto& [n, t] : opt->state()) out.emplace_back("o." + n, test::tensor_bytes(t));
  return out;
}

// The MLP of the resume tests: 784-64-64-10, ReLU, dropout 0.2 drawing from the default
// generator (no generator of its own), initialised from `seed`.
nn::ModulePtr small_mlp(std::uint64_t seed, std::int64_t hidden = 64) {
  Generator g(seed);
  auto net = std::make_shared<nn::Sequential>();
  net->add(std::make_shared<nn::Linear>(784, hidden, true, &g));
  net->add(nn::ReLU());
  net->add(std::make_shared<nn::Dropout>(0.2));
  net->add(std::make_shared<nn::Linear>(hidden, hidden, true, &g));
  net->add(nn::ReLU());
  net->add(std::make_shared<nn::Dropout>(0.2));
  net->add(std::make_shared<nn::Linear>(hidden, 10, true, &g));
  return net;
}

struct Batch {
  Tensor x, y;
};
Batch fixed_batch() {
  Generator g(1234);
  return {normal({32, 784}, 0.0, 1.0, DType::f32, &g), randint({32}, 0, 10, DType::i64, &g)};
}

void train_steps(nn::Module& net, optim::Optimizer& opt, const Batch& b, int steps) {
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    Tensor loss = cross_entropy(net.forward(b.x), b.y);
    loss.backward();
    opt.step();
  }
}

}  // namespace

// ---- safetensors ------------------------------------------------------------------------

TEST_CASE("safetensors round trip is bit-exact for every dtype, 0-d tensors and views",
          "[checkpoint]") {
  test::ScratchDir dir("ckpt");
  const std::string path = dir.file("t.safetensors");
  Generator g(7);
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor base = normal({4, 6}, 0.0, 1.0, DType::f32, &g);
  NamedTensors tensors = {
      {"f32", normal({3, 5}, 0.0, 1.0, DType::f32, &g)},
      {"special", Tensor::from_vector(std::vector<float>{-0.0f, inf, -inf, std::nanf("0x123"),
                                                         std::numeric_limits<float>::denorm_min()},
                                      {5})},
      {"f64", normal({2, 2, 2}, 0.0, 1.0, DType::f64, &g)},
      {"i64", randint({7}, -1000000000000LL, 1000000000000LL, DType::i64, &g)},
      {"i32", randint({4, 1}, -100000, 100000, DType::i32, &g)},
      {"scalar", Tensor::scalar(3.25, DType::f32)},
      {"transposed", raw::transpose(base, 0, 1)},  // non-contiguous view
      {"strided", raw::slice(base, 1, 1, 6, 2)},   // non-contiguous, offset
      {"empty", Tensor::zeros({0, 3}, DType::f64)},
  };
  REQUIRE_FALSE(tensors[6].second.is_contiguous());
  REQUIRE_FALSE(tensors[7].second.is_contiguous());
  const std::map<std::string, std::string> metadata = {
      {"epoch", "3"}, {"unicode", "\xc3\xbc \xe2\x80\xa6"}, {"empty", ""}};
  save_safetensors(path, tensors, metadata);

  const SafetensorsFile f = load_safetensors(path);
  CHECK(f.metadata == metadata);
  REQUIRE(f.tensors.size() == tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    INFO(tensors[i].first);
    CHECK(f.tensors[i].first == tensors[i].first);  // file order = save order
    CHECK(f.tensors[i].second.is_contiguous());
    CHECK(f.tensors[i].second.device().is_cpu());
    CHECK(same_bits(f.tensors[i].second, tensors[i].second));
  }
  CHECK(f.at("scalar").dim() == 0);
  CHECK(f.at("scalar").item() == 3.25);
  CHECK_THROWS_WITH(f.at("nope"), Catch::Contains("no tensor 'nope'") && Catch::Contains("f32"));
  CHECK(load_safetensors_metadata(path) == metadata);

  // Saving again replaces the file and leaves no temporary file behind.
  save_safetensors(path, {{"only", Tensor::ones({2})}});
  CHECK(load_safetensors(path).tensors.size() == 1);
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("safetensors files follow the format byte for byte", "[checkpoint]") {
  // Checked by hand here, independently of load_safetensors.
  test::ScratchDir dir("ckpt");
  const std::string path = dir.file("layout.safetensors");
  const Tensor a = Tensor::from_vector(std::vector<float>{1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  const Tensor b = Tensor::from_vector(std::vector<std::int64_t>{-1, 1LL << 40}, {2});
  const Tensor c = Tensor::scalar(0.5, DType::f64);
  const Tensor d = Tensor::from_vector(std::vector<std::int32_t>{-7}, {1, 1});
  save_safetensors(path, {{"a", a}, {"b", b}, {"c", c}, {"d", d}}, {{"k", "v"}});

  const std::string bytes = test::read_file(path);
  REQUIRE(bytes.size() >= 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[i]);  // little-endian
  CHECK((8 + n) % 8 == 0);                                // data section 8-byte aligned
  REQUIRE(8 + n <= bytes.size());
  const std::string header = bytes.substr(8, n);
  CHECK(header.front() == '{');
  const auto last = header.find_last_not_of(' ');
  CHECK(header[last] == '}');
  CHECK(n - last - 1 < 8);  // padded with fewer than 8 spaces
  const auto j = nlohmann::json::parse(header);
  CHECK(j["__metadata__"] == nlohmann::json({{"k", "v"}}));
  using J = nlohmann::json;
  CHECK(j["a"] == J({{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {0, 24}}}));
  CHECK(j["b"] == J({{"dtype", "I64"}, {"shape", {2}}, {"data_offsets", {24, 40}}}));
  CHECK(j["c"] == J({{"dtype", "F64"}, {"shape", J::array()}, {"data_offsets", {40, 48}}}));
  CHECK(j["d"] == J({{"dtype", "I32"}, {"shape", {1, 1}}, {"data_offsets", {48, 52}}}));
  CHECK(j.size() == 5);
  const std::string data = bytes.substr(8 + n);
  CHECK(data.size() == 52);
  // Little-endian values at the recorded offsets.
  float f3;
  std::memcpy(&f3, data.data() + 2 * 4, 4);
  CHECK(f3 == 3.f);
  CHECK(data.substr(24, 16) ==
        std::string("\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00\x00\x01\x00\x00", 16));
  CHECK(data.substr(40, 8) == std::string("\x00\x00\x00\x00\x00\x00\xe0\x3f", 8));  // 0.5
  CHECK(data.substr(48, 4) == std::string("\xf9\xff\xff\xff", 4));                  // -7
}

TEST_CASE("safetensors reads a file written by the reference implementation", "[checkpoint]") {
  // safetensors 0.8.0 (Python), safetensors.numpy.save of
  //   ids = int64 [1, -2, 3], scalar = float64 2.5 (0-d), weight = float32 arange(6).reshape(2, 3)
  //   * 0.5, count = int32 [7, -8], metadata {"format": "np", "note": "from python"}.
  // Its header lists __metadata__ first and orders tensors by alignment, then name.
  const std::string header =
      R"({"__metadata__":{"note":"from python","format":"np"},"ids":{"dtype":"I64")"
      R"(,"shape":[3],"data_offsets":[0,24]},"scalar":{"dtype":"F64","shape":[])"
      R"(,"data_offsets":[24,32]},"weight":{"dtype":"F32","shape":[2,3])"
      R"(,"data_offsets":[32,56]},"count":{"dtype":"I32","shape":[2])"
      R"(,"data_offsets":[56,64]}})"
      "       ";  // 7 spaces of padding
  REQUIRE(header.size() == 296);
  const std::string data(
      "\x01\x00\x00\x00\x00\x00\x00\x00\xfe\xff\xff\xff\xff\xff\xff\xff"
      "\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04\x40"
      "\x00\x00\x00\x00\x00\x00\x00\x3f\x00\x00\x80\x3f\x00\x00\xc0\x3f"
      "\x00\x00\x00\x40\x00\x00\x20\x40\x07\x00\x00\x00\xf8\xff\xff\xff",
      64);
  // The 8-byte little-endian header length 296 = 0x128, as the reference wrote it.
  const std::string bytes = std::string("\x28\x01\x00\x00\x00\x00\x00\x00", 8) + header + data;
  test::ScratchDir dir("ckpt");
  const std::string path = dir.file("python.safetensors");
  test::overwrite_file(path, bytes);
  const SafetensorsFile f = load_safetensors(path);
  CHECK(f.metadata ==
        std::map<std::string, std::string>{{"format", "np"}, {"note", "from python"}});
  REQUIRE(f.tensors.size() == 4);
  CHECK(f.tensors[0].first == "ids");  // in data order
  CHECK(same_bits(f.at("ids"), Tensor::from_vector(std::vector<std::int64_t>{1, -2, 3}, {3})));
  CHECK(same_bits(f.at("scalar"), Tensor::scalar(2.5, DType::f64)));
  CHECK(same_bits(f.at("weight"),
                  Tensor::from_vector(std::vector<float>{0, .5f, 1, 1.5f, 2, 2.5f}, {2, 3})));
  CHECK(same_bits(f.at("count"), Tensor::from_vector(std::vector<std::int32_t>{7, -8}, {2})));
}

TEST_CASE("a killed writer leaves the old file intact", "[checkpoint]") {
  test::ScratchDir dir("ckpt");
  const std::string path = dir.file("ckpt.safetensors");
  const Tensor old = Tensor::arange(1000, DType::f32);
  save_safetensors(path, {{"w", old}}, {{"version", "old"}});
  const Tensor big = Tensor::full({16 * 1024 * 1024}, 1.5);  // 64 MiB
  const std::uint64_t big_file = 64ull << 20;

  SECTION("killed at a known point by the test hook") {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // child: dies by SIGKILL once 8 MiB of the new file are written
      detail::set_safetensors_write_hook([](std::uint64_t written) {
        if (written >= (8u << 20)) ::raise(SIGKILL);
      });
      try {
        save_safetensors(path, {{"w", big}}, {{"version", "new"}});
      } catch (...) {}
      ::_exit(3);  // not reached
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
    // The half-written temporary file is there (nothing runs on SIGKILL), `path` is not it.
    const std::string tmp = path + ".tmp." + std::to_string(pid);
    REQUIRE(fs::exists(tmp));
    CHECK(fs::file_size(tmp) >= (8u << 20));
    CHECK(fs::file_size(tmp) < big_file);
    const SafetensorsFile f = load_safetensors(path);
    CHECK(f.metadata.at("version") == "old");
    REQUIRE(f.tensors.size() == 1);
    CHECK(same_bits(f.tensors[0].second, old));
  }

  SECTION("killed asynchronously while writing") {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        for (;;) save_safetensors(path, {{"w", big}}, {{"version", "new"}});
      } catch (...) {}
      ::_exit(3);
    }
    // Wait until the child is writing (its temporary file has data), then kill it.
    const std::string tmp = path + ".tmp." + std::to_string(pid);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::error_code ec;
    while (std::chrono::steady_clock::now() < deadline && fs::file_size(tmp, ec) < (1u << 20))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status));
    // `path` is the complete old file or the complete new one, never a mixture.
    const SafetensorsFile f = load_safetensors(path);
    REQUIRE(f.tensors.size() == 1);
    if (f.metadata.at("version") == "old")
      CHECK(same_bits(f.tensors[0].second, old));
    else
      CHECK(same_bits(f.tensors[0].second, big));
  }
}

TEST_CASE("a failed save removes its temporary file and keeps the old one", "[checkpoint]") {
  test::ScratchDir dir("ckpt");
  SECTION("missing directory") {
    const std::string path = dir.file("missing/sub/x.safetensors");
    CHECK_THROWS_WITH(save_safetensors(path, {{"a", Tensor::ones({2})}}),
                      Catch::Contains("save_safetensors") && Catch::Contains(path) &&
                          Catch::Contains("cannot create temporary file"));
    CHECK_FALSE(fs::exists(dir.path() / "missing"));
    CHECK(fs::is_empty(dir.path()));
  }
  SECTION("an error in the middle of writing") {
    const std::string path = dir.file("x.safetensors");
    save_safetensors(path, {{"a", Tensor::ones({2})}});
    detail::set_safetensors_write_hook([](std::uint64_t written) {
      if (written > 8) fail("test hook", "simulated I/O error");
    });
    CHECK_THROWS_WITH(save_safetensors(path, {{"a", Tensor::zeros({1 << 20})}}),
                      Catch::Contains("simulated I/O error"));
    detail::set_safetensors_write_hook({});
    CHECK(same_bits(load_safetensors(path).at("a"), Tensor::ones({2})));
    CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
  }
  SECTION("bad arguments are rejected before anything is written") {
    const std::string path = dir.file("y.safetensors");
    CHECK_THROWS_WITH(save_safetensors(path, {{"a", Tensor::ones({2})}, {"a", Tensor::ones({1})}}),
                      Catch::Contains("duplicate tensor name 'a'"));
    CHECK_THROWS_WITH(save_safetensors(path, {{"__metadata__", Tensor::ones({2})}}),
                      Catch::Contains("reserved"));
    CHECK_THROWS_WITH(save_safetensors(path, {{"u", Tensor()}}),
                      Catch::Contains("'u' is undefined"));
    CHECK_THROWS_WITH(save_safetensors(path, {{"\xff", Tensor::ones({1})}}),
                      Catch::Contains("cannot encode the header"));
    CHECK(fs::is_empty(dir.path()));
  }
}

TEST_CASE("malformed safetensors files are rejected with the file and the problem",
          "[checkpoint]") {
  test::ScratchDir dir("ckpt");
  const std::string path = dir.file("bad.safetensors");
  save_safetensors(path, {{"a", Tensor::arange(4)}, {"b", Tensor::arange(3, DType::f64)}});
  const std::string good = test::read_file(path);
  auto rejects = [&](const std::string& bytes, const std::string& what) {
    test::overwrite_file(path, bytes);
    INFO(what);
    CHECK_THROWS_WITH(load_safetensors(path), Catch::Contains("load_safetensors") &&
                                                  Catch::Contains(path) && Catch::Contains(what));
  };
  const std::string data8(8, '\0');

  rejects("", "shorter than the 8-byte header length");
  rejects(good.substr(0, 5), "shorter than the 8-byte header length");
  rejects(good.substr(0, 20), "is larger than the rest of the file");        // cut in the header
  rejects(good.substr(0, good.size() - 4), "lie outside the data section");  // cut in the data
  std::string huge = good;
  huge.replace(0, 8, std::string("\0\0\0\0\0\x01\0\0", 8));  // header length 2^40
  rejects(huge, "header length 1099511627776 is larger than the rest of the file");
  rejects(good + "xxxx", "data section is 44 bytes but the tensors cover 40");
  // Hand-built headers; t(dtype, shape, offsets) is one tensor entry.
  auto t = [](const char* dtype, const char* shape, const char* offsets) {
    return std::string(R"({"dtype": ")") + dtype + R"(", "shape": )" + shape +
           R"(, "data_offsets": )" + offsets + "}";
  };
  rejects(raw_file("[1, 2]  ", ""), "does not start with '{'");
  rejects(raw_file("{not json at all}", ""), "invalid JSON header");
  rejects(raw_file(R"({"a": )" + t("F32", "[2]", "[0, 8]"), data8), "invalid JSON header");
  rejects(raw_file(R"({"a": )" + t("U16", "[4]", "[0, 8]") + "}", data8),
          R"(unsupported dtype "U16")");
  rejects(raw_file(R"({"a": )" + t("float32", "[2]", "[0, 8]") + "}", data8),
          R"(unsupported dtype "float32")");
  rejects(raw_file(R"({"a": )" + t("F32", "[1000]", "[0, 4000]") + "}", data8),
          "data_offsets [0, 4000] lie outside the data section (8 bytes)");
  rejects(raw_file(R"({"a": )" + t("F32", "[3]", "[0, 8]") + "}", data8),
          "shape [3] F32 needs 12 bytes but data_offsets [0, 8] hold 8");
  rejects(raw_file(R"({"a": )" + t("F32", "[-2]", "[0, 8]") + "}", data8),
          "must hold non-negative integers");
  rejects(raw_file(R"({"a": )" + t("F32", "[2.0]", "[0, 8]") + "}", data8),
          "must hold non-negative integers");
  rejects(raw_file(R"({"a": )" + t("F32", "[2]", "[8, 0]") + "}", data8), "must be [begin, end]");
  rejects(raw_file(R"({"a": {"dtype": "F32", "shape": [2]}})", data8),
          "tensor 'a' has no 'data_offsets'");
  rejects(
      raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": 1}})", data8),
      "unknown field 'x'");
  rejects(raw_file(R"({"a": )" + t("I32", "[2]", "[0, 8]") + R"(, "b": )" +
                       t("I32", "[1]", "[4, 8]") + "}",
                   data8),
          "overlap tensor 'a'");
  rejects(raw_file(R"({"a": )" + t("I32", "[1]", "[0, 4]") + R"(, "b": )" +
                       t("I32", "[1]", "[8, 12]") + "}",
                   data8 + "1234"),
          "bytes [4, 8) of the data section belong to no tensor");
  rejects(raw_file(R"({"a": )" + t("I32", "[1]", "[0, 4]") + R"(, "a": )" +
                       t("I32", "[1]", "[4, 8]") + "}",
                   data8),
          "duplicate key 'a'");
  rejects(raw_file(R"({"__metadata__": {"epoch": 3}})", ""), "metadata 'epoch' is not a string");
  rejects(raw_file(R"({"__metadata__": [1]})", ""), "__metadata__ is not a JSON object");
  rejects(raw_file("{\"\xff\": " + t("F32", "[1]", "[0, 4]") + "}", "1234"),
          "ill-formed UTF-8");  // a name that is not UTF-8
  CHECK_THROWS_WITH(load_safetensors(dir.file("nothing.safetensors")),
                    Catch::Contains("cannot open") && Catch::Contains("nothing.safetensors"));
  CHECK_THROWS_WITH(load_safetensors(dir.path().string()), Catch::Contains("not a regular file"));
}

// ---- generator and optimizer state --------------------------------------------------------

TEST_CASE("a generator's state round-trips through text", "[checkpoint]") {
  Generator g(99);
  for (int i = 0; i < 1000; ++i) g.next();
  const std::string s = g.state();
  std::vector<std::uint64_t> a, b;
  for (int i = 0; i < 700; ++i) a.push_back(g.next());  // crosses a regeneration of the state
  Generator h(1);
  h.set_state(s);
  for (int i = 0; i < 700; ++i) b.push_back(h.next());
  CHECK(a == b);
  CHECK_THROWS_WITH(h.set_state("1 2 3"), Catch::Contains("Generator::set_state") &&
                                              Catch::Contains("not an mt19937_64 state"));
  CHECK_THROWS_WITH(h.set_state(s + " 17"), Catch::Contains("not an mt19937_64 state"));
  const std::string before = h.state();
  CHECK_THROWS(h.set_state("garbage"));
  CHECK(h.state() == before);  // a failed set_state changes nothing
}

TEST_CASE("optimizer state exports only what exists and checks what it loads", "[checkpoint]") {
  auto net = small_mlp(1);
  const Batch b = fixed_batch();
  optim::Adam adam(net->parameters(), {.lr = 1e-3});
  CHECK(adam.state().empty());  // nothing created before the first step
  CHECK(adam.state_metadata().at("step") == "0");
  manual_seed(5);
  train_steps(*net, adam, b, 2);
  const auto st = adam.state();
  REQUIRE(st.size() == 2 * net->parameters().size());
  CHECK(st[0].first == "adam.m.0");
  CHECK(st[1].first == "adam.v.0");
  const auto md = adam.state_metadata();
  CHECK(md.at("type") == "Adam");
  CHECK(md.at("step") == "2");
  CHECK(md.at("num_params") == "6");
  CHECK(md.at("lr") == "0.001");  // shortest text that reads back to the same double

  optim::Adam other(small_mlp(2)->parameters(), {.lr = 0.5, .beta1 = 0.5});
  other.load_state(st, md);
  CHECK(other.steps() == 2);
  CHECK(other.lr() == 1e-3);
  CHECK(other.options().beta1 == 0.9);
  const auto st2 = other.state();
  REQUIRE(st2.size() == st.size());
  for (std::size_t i = 0; i < st.size(); ++i) {
    CHECK(st2[i].first == st[i].first);
    CHECK(same_bits(st2[i].second, st[i].second));
    CHECK_FALSE(st2[i].second.shares_storage_with(st[i].second));  // copied in
  }

  // Every mismatch is named; the optimizer is left as it was.
  auto wrong = st;
  wrong[0].second = Tensor::zeros({3, 3});
  CHECK_THROWS_WITH(other.load_state(wrong, md),
                    Catch::Contains("Adam::load_state") &&
                        Catch::Contains("'adam.m.0' is [3,3] f32") &&
                        Catch::Contains("parameter 0 is [64,784] f32"));
  wrong = st;
  wrong.pop_back();
  CHECK_THROWS_WITH(other.load_state(wrong, md), Catch::Contains("adam.m but no adam.v"));
  wrong = st;
  wrong[0].first = "adam.m.99";
  CHECK_THROWS_WITH(other.load_state(wrong, md), Catch::Contains("is for parameter 99"));
  wrong[0].first = "adam.mm.0";
  CHECK_THROWS_WITH(other.load_state(wrong, md),
                    Catch::Contains("unexpected state tensor 'adam.mm.0'"));
  auto md2 = md;
  md2["num_params"] = "5";
  CHECK_THROWS_WITH(other.load_state(st, md2),
                    Catch::Contains("the state is for 5 parameters, this optimizer has 6"));
  md2 = md;
  md2["beta1"] = "zero point nine";
  CHECK_THROWS_WITH(other.load_state(st, md2),
                    Catch::Contains("'beta1' = \"zero point nine\" is not a number"));
  md2 = md;
  md2.erase("step");
  CHECK_THROWS_WITH(other.load_state(st, md2), Catch::Contains("the state has no 'step'"));
  CHECK(other.steps() == 2);

  optim::SGD sgd(net->parameters(), {.lr = 0.1, .momentum = 0.9});
  CHECK_THROWS_WITH(sgd.load_state(st, md),
                    Catch::Contains("SGD::load_state") &&
                        Catch::Contains("the state was saved by Adam, this optimizer is SGD"));
  CHECK(sgd.state().empty());
  train_steps(*net, sgd, b, 1);
  CHECK(sgd.state().size() == 6);
  CHECK(sgd.state()[5].first == "sgd.momentum.5");
  CHECK(sgd.state_metadata().at("nesterov") == "false");
}

TEST_CASE("checkpoint round trip of a model with buffers and Adam is bit-exact", "[checkpoint]") {
  test::ScratchDir dir("ckpt");
  const std::string path = dir.file("ckpt.safetensors");
  auto make = [](std::uint64_t seed) { return test::checkpoint_conv_net(seed, false); };
  auto net = make(1);
  REQUIRE_FALSE(net->named_buffers().empty());
  optim::Adam adam(net->parameters(), {.lr = 1e-2});
  Generator g(3);
  const Batch b{normal({4, 1, 6, 6}, 0.0, 1.0, DType::f32, &g), randint({4}, 0, 3, DType::i64, &g)};
  train_steps(*net, adam, b, 2);  // running statistics and Adam state now differ from init
  manual_seed(77);
  const std::string rng = default_generator().state();
  save_checkpoint(path, *net, &adam, {{"model", "tiny_cnn"}, {"epoch", "1"}, {"step", "2"}});
  const auto expected = snapshot(*net, &adam);

  auto fresh = make(2);
  optim::Adam adam2(fresh->parameters(), {.lr = 1.0});
  const std::vector<Tensor> handles = fresh->parameters();
  manual_seed(1);
  const optim::CheckpointInfo info = optim::load_checkpoint(path, *fresh, &adam2);
  CHECK(snapshot(*fresh, &adam2) == expected);  // every byte of every tensor
  CHECK(adam2.steps() == 2);
  CHECK(adam2.lr() == 1e-2);
  CHECK(default_generator().state() == rng);
  for (std::size_t i = 0; i < handles.size(); ++i)  // overwritten in place
    CHECK(handles[i].is_same(fresh->parameters()[i]));
  CHECK(info.format_version == optim::kCheckpointFormatVersion);
  CHECK(info.optimizer == "Adam");
  CHECK(info.extra ==
        std::map<std::string, std::string>{{"epoch", "1"}, {"model", "tiny_cnn"}, {"step", "2"}});
  CHECK(info.metadata.at("optim.step") == "2");
  const auto peek = optim::read_checkpoint_info(path);
  CHECK(peek.extra == info.extra);
  CHECK(peek.optimizer == "Adam");

  // The tensors are named model.* and optim.* in the file.
  const SafetensorsFile f = load_safetensors(path);
  CHECK(same_bits(f.at("model.0.weight"), net->named_parameters()[0].second));
  CHECK(same_bits(f.at("optim.adam.v.1"), adam.state()[3].second));
  CHECK_THROWS_WITH(save_checkpoint(path, *net, &adam, {{"optim.lr", "1"}}),
                    Catch::Contains("reserved prefix"));
}

namespace {

// 6 steps straight vs 3 steps, checkpoint, fresh model and optimizer (other init), load, 3 steps.
template <typename MakeOpt>
void check_resume_is_bit_exact(MakeOpt make_opt) {
  test::ScratchDir dir("ckpt");
  const std::string path = dir.file("resume.safetensors");
  const Batch b = fixed_batch();

  manual_seed(2024);
  auto straight = small_mlp(1);
  auto opt_a = make_opt(straight->parameters());
  train_steps(*straight, *opt_a, b, 6);

  manual_seed(2024);
  auto first = small_mlp(1);
  auto opt_b = make_opt(first->parameters());
  train_steps(*first, *opt_b, b, 3);
  optim::save_checkpoint(path, *first, opt_b.get(), {{"step", "3"}});
  first.reset();
  opt_b.reset();

  manual_seed(555);  // the checkpoint must restore the dropout stream
  auto resumed = small_mlp(2);
  auto opt_c = make_opt(resumed->parameters());
  const auto info = optim::load_checkpoint(path, *resumed, opt_c.get());
  CHECK(info.extra.at("step") == "3");
  train_steps(*resumed, *opt_c, b, 3);

  const auto want = snapshot(*straight, opt_a.get());
  const auto got = snapshot(*resumed, opt_c.get());
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].first);
    CHECK(got[i].first == want[i].first);
    CHECK(got[i].second == want[i].second);
  }
  // The generator's restore matters: the same resume with another dropout stream differs.
  auto unseeded = small_mlp(2);
  auto opt_d = make_opt(unseeded->parameters());
  optim::load_checkpoint(path, *unseeded, opt_d.get());
  manual_seed(555);
  train_steps(*unseeded, *opt_d, b, 3);
  CHECK(snapshot(*unseeded, nullptr) != snapshot(*straight, nullptr));
}

}  // namespace

TEST_CASE("resuming from a checkpoint is bit-exact with Adam and dropout", "[checkpoint]") {
  check_resume_is_bit_exact([](std::vector<Tensor> p) {
    return std::make_unique<optim::Adam>(std::move(p),
                                         optim::AdamOptions{.lr = 1e-3, .weight_decay = 1e-4});
  });
}

TEST_CASE("resuming from a checkpoint is bit-exact with SGD momentum and dropout", "[checkpoint]") {
  check_resume_is_bit_exact([](std::vector<Tensor> p) {
    return std::make_unique<optim::SGD>(std::move(p),
                                        optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  });
  check_resume_is_bit_exact([](std::vector<Tensor> p) {
    return std::make_unique<optim::SGD>(
        std::move(p),
        optim::SGDOptions{
            .lr = 0.05, .momentum = 0.9, .dampening = 0, .weight_decay = 1e-3, .nesterov = true});
  });
}

TEST_CASE("checkpoints that do not fit are rejected and change nothing", "[checkpoint]") {
  test::ScratchDir dir("ckpt");
  const std::string path = dir.file("mlp.safetensors");
  auto net = small_mlp(1);
  optim::Adam adam(net->parameters(), {});
  manual_seed(3);
  train_steps(*net, adam, fixed_batch(), 1);
  optim::save_checkpoint(path, *net, &adam);

  SECTION("a checkpoint of another model names the tensor and both shapes") {
    auto narrow = small_mlp(1, 32);
    const auto before = snapshot(*narrow, nullptr);
    CHECK_THROWS_WITH(optim::load_checkpoint(path, *narrow, nullptr),
                      Catch::Contains("load_checkpoint") && Catch::Contains(path) &&
                          Catch::Contains("tensor 'model.0.weight' is [64,784] f32 in the "
                                          "checkpoint but [32,784] f32 in the model"));
    CHECK(snapshot(*narrow, nullptr) == before);
  }
  SECTION("a missing tensor") {
    auto deeper = small_mlp(1);
    std::static_pointer_cast<nn::Sequential>(deeper)->add(std::make_shared<nn::Linear>(10, 10));
    CHECK_THROWS_WITH(
        optim::load_checkpoint(path, *deeper, nullptr),
        Catch::Contains(
            "the model's tensor 'model.7.weight' [10,10] is missing from the checkpoint"));
  }
  SECTION("a tensor the model does not have") {
    auto shallow = std::make_shared<nn::Sequential>();
    shallow->add(std::make_shared<nn::Linear>(784, 64));
    CHECK_THROWS_WITH(optim::load_checkpoint(path, *shallow, nullptr),
                      Catch::Contains("tensor 'model.3.bias' [64] is not in the model"));
  }
  SECTION("Adam state into SGD") {
    auto other = small_mlp(2);
    const auto before = snapshot(*other, nullptr);
    const std::string rng = default_generator().state();
    optim::SGD sgd(other->parameters(), {.lr = 0.1, .momentum = 0.9});
    CHECK_THROWS_WITH(optim::load_checkpoint(path, *other, &sgd),
                      Catch::Contains(path) && Catch::Contains("SGD::load_state") &&
                          Catch::Contains("the state was saved by Adam"));
    CHECK(snapshot(*other, nullptr) == before);  // parameters untouched
    CHECK(default_generator().state() == rng);   // and the generator
    CHECK(sgd.lr() == 0.1);
  }
  SECTION("an optimizer asked from a checkpoint without one") {
    optim::save_checkpoint(path, *net, nullptr);
    optim::Adam fresh(net->parameters(), {});
    CHECK_THROWS_WITH(optim::load_checkpoint(path, *net, &fresh),
                      Catch::Contains("holds no optimizer state"));
    CHECK_NOTHROW(optim::load_checkpoint(path, *net, nullptr));
  }
  SECTION("a safetensors file that is not a checkpoint") {
    save_safetensors(path, {{"model.0.weight", Tensor::zeros({64, 784})}});
    CHECK_THROWS_WITH(optim::load_checkpoint(path, *net, nullptr),
                      Catch::Contains("not an anvil checkpoint (no 'anvil.format_version'"));
    save_safetensors(path, {}, {{"anvil.format_version", "99"}});
    CHECK_THROWS_WITH(optim::read_checkpoint_info(path),
                      Catch::Contains("format version 99, this build reads version 1"));
  }
  SECTION("a truncated checkpoint") {
    const std::string bytes = test::read_file(path);
    test::overwrite_file(path, bytes.substr(0, bytes.size() / 2));
    CHECK_THROWS_WITH(optim::load_checkpoint(path, *net, &adam),
                      Catch::Contains(path) && Catch::Contains("lie outside the data section"));
  }
}
