// SPDX-License-Identifier: Apache-2.0
// The JSON reader of the safetensors header and the IMDB word index (Note [Linear JSON] in
// engine/core/json_reader.h): wide headers parse in time linear in their size, deep ones are
// refused at the depth cap instead of overflowing the stack, duplicate keys are refused at every
// depth, and messages quote only a short prefix of a bad value or key.
//
// The time bounds are generous on purpose: the 200k-entry header parses in about a second here
// (2 shared cores, Release), while the quadratic parser this replaces took over 400 s for 100k
// entries, so a bound of 20 s separates the two by an order of magnitude each way and does not
// trip on a loaded machine.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "data/imdb.h"

using namespace anvil;
using Catch::Contains;

namespace {

// A safetensors file (bytes) with `header` as its JSON header and no data.
std::vector<std::uint8_t> safetensors_bytes(std::string header) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<std::uint8_t> out(8 + header.size());
  const std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

// {"t0": {zero-size F32}, "t1": ..., } with `n` entries (and `extra` before the closing brace).
std::string wide_header(std::size_t n, const std::string& extra = "") {
  std::string h = "{";
  for (std::size_t i = 0; i < n; ++i) {
    h += i ? ",\"t" : "\"t";
    h += std::to_string(i);
    h += "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}";
  }
  h += extra;
  h += '}';
  return h;
}

std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The message of the anvil::Error that `f` throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("safetensors: a 200k-entry header parses in linear time", "[checkpoint][json]") {
  const auto bytes = safetensors_bytes(wide_header(200000));
  INFO("header of " << bytes.size() << " bytes");
  const auto t0 = std::chrono::steady_clock::now();
  const SafetensorsFile f = parse_safetensors(bytes.data(), bytes.size(), "wide.safetensors");
  const double dt = seconds_since(t0);
  INFO("parsed in " << dt << " s");
  CHECK(f.tensors.size() == 200000);
  CHECK(dt < 20.0);
  // A duplicate at the very end of the wide header is found, as quickly.
  const auto dup = safetensors_bytes(
      wide_header(200000, ",\"t7\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}"));
  const auto t1 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(parse_safetensors(dup.data(), dup.size(), "dup.safetensors"),
                    Contains("dup.safetensors: duplicate key 't7' in the top level"));
  CHECK(seconds_since(t1) < 20.0);
}

TEST_CASE("safetensors: nesting deeper than the cap is refused, not a stack overflow",
          "[checkpoint][json]") {
  for (const std::string& header :
       {"{\"__metadata__\":{\"a\":" + nested(200000) + "}}",
        "{\"x\":{\"dtype\":" + nested(200000) + ",\"shape\":[0],\"data_offsets\":[0,0]}}",
        "{\"x\":" + nested(65) + "}"}) {
    const auto bytes = safetensors_bytes(header);
    const std::string msg =
        error_of([&] { parse_safetensors(bytes.data(), bytes.size(), "deep.safetensors"); });
    CHECK_THAT(msg, Contains("deep.safetensors: JSON nested deeper than 64 levels"));
    CHECK(msg.size() < 300);
  }
  // 64 levels are within the cap: refused by the schema, quoting a prefix of the value.
  const auto ok_depth = safetensors_bytes("{\"x\":" + nested(63) + "}");
  const std::string msg =
      error_of([&] { parse_safetensors(ok_depth.data(), ok_depth.size(), "d.safetensors"); });
  CHECK_THAT(msg, Contains("tensor 'x' is not a JSON object: [[[[") && Contains("..."));
  CHECK(msg.size() < 300);
}

TEST_CASE("safetensors: messages quote a short prefix of a bad value or name",
          "[checkpoint][json]") {
  std::string numbers = "[0";
  for (int i = 0; i < 100000; ++i) numbers += ",0";
  numbers += "]";
  const auto wide_value = safetensors_bytes("{\"__metadata__\":{\"a\":" + numbers + "}}");
  std::string msg =
      error_of([&] { parse_safetensors(wide_value.data(), wide_value.size(), "v.safetensors"); });
  CHECK_THAT(msg, Contains("metadata 'a' is not a string: [0, 0, 0") && Contains("..."));
  CHECK(msg.size() < 300);
  // A 1 MB tensor name with a bad dtype, and the same 1 MB key twice.
  const std::string name(1 << 20, 'n');
  const auto long_name = safetensors_bytes("{\"" + name +
                                           "\":{\"dtype\":\"U16\",\"shape\":[0],"
                                           "\"data_offsets\":[0,0]}}");
  msg = error_of([&] { parse_safetensors(long_name.data(), long_name.size(), "n.safetensors"); });
  CHECK_THAT(msg, Contains("n'... (1048576 bytes) has unsupported dtype \"U16\""));
  CHECK(msg.size() < 300);
  const auto twice =
      safetensors_bytes("{\"__metadata__\":{\"" + name + "\":\"a\",\"" + name + "\":\"b\"}}");
  msg = error_of([&] { parse_safetensors(twice.data(), twice.size(), "k.safetensors"); });
  CHECK_THAT(msg, Contains("duplicate key 'nnn") && Contains("(1048576 bytes) in the value at "
                                                             "'__metadata__'"));
  CHECK(msg.size() < 300);
  // A malformed token of 1 MB: nlohmann's message would quote all of it.
  const auto bad_token = safetensors_bytes("{\"a\":" + std::string(1 << 20, '1') + "x}");
  msg = error_of([&] { parse_safetensors(bad_token.data(), bad_token.size(), "t.safetensors"); });
  CHECK_THAT(msg, Contains("invalid JSON header"));
  CHECK(msg.size() < 600);
}

TEST_CASE("safetensors: duplicate keys are refused at every depth", "[checkpoint][json]") {
  const auto inner = safetensors_bytes(
      "{\"x\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}");
  CHECK_THROWS_WITH(parse_safetensors(inner.data(), inner.size(), "i.safetensors"),
                    Contains("i.safetensors: duplicate key 'dtype' in the value at 'x'"));
  const auto meta = safetensors_bytes("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}");
  CHECK_THROWS_WITH(parse_safetensors(meta.data(), meta.size(), "m.safetensors"),
                    Contains("duplicate key 'k' in the value at '__metadata__'"));
}

TEST_CASE("IMDB word index: wide, deep and repeated input is refused quickly and briefly",
          "[data][imdb][json]") {
  // 100k words whose ranks are objects: the quadratic parser took minutes on this.
  std::string index = "{";
  for (int i = 0; i < 100000; ++i) {
    index += i ? ",\"w" : "\"w";
    index += std::to_string(i);
    index += "\":{}";
  }
  index += "}";
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(data::parse_imdb_word_index(index, "objects.json"),
                    Contains("objects.json: the rank of 'w0' is {} (an object), not an integer"));
  CHECK(seconds_since(t0) < 20.0);
  // A valid index of 300k words, and the same with one word repeated at its end.
  std::string words = "{";
  for (int i = 0; i < 300000; ++i) {
    words += i ? ",\"w" : "\"w";
    words += std::to_string(i);
    words += "\":";
    words += std::to_string(i + 1);
  }
  const auto t1 = std::chrono::steady_clock::now();
  CHECK(data::parse_imdb_word_index(words + "}", "wide.json").size() == 300000);
  CHECK_THROWS_WITH(data::parse_imdb_word_index(words + ",\"w5\":7}", "dup.json"),
                    Contains("dup.json: duplicate key 'w5' in the top level"));
  CHECK(seconds_since(t1) < 20.0);
  // A deep rank: refused at the cap with a short message.
  const std::string msg = error_of(
      [&] { data::parse_imdb_word_index("{\"the\":" + nested(100000) + "}", "deep.json"); });
  CHECK_THAT(msg, Contains("deep.json: JSON nested deeper than 64 levels"));
  CHECK(msg.size() < 300);
  // A rank that is a long array is quoted by a prefix.
  std::string numbers = "[1";
  for (int i = 0; i < 100000; ++i) numbers += ",1";
  const std::string long_msg =
      error_of([&] { data::parse_imdb_word_index("{\"the\":" + numbers + "]}", "long.json"); });
  CHECK_THAT(long_msg, Contains("the rank of 'the' is [1, 1, 1") && Contains("(an array)"));
  CHECK(long_msg.size() < 300);
}
