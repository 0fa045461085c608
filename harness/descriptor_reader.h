// SPDX-License-Identifier: Apache-2.0
#pragma once
// The descriptor reader and writer helpers that harness/problem_descriptor.cpp and
// harness/memory_bound_descriptors.cpp share (Note [Problem descriptors]), and the descriptors of
// the pointwise, reduction, softmax, embedding, dropout and optimizer problems. Internal to
// harness/.
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/error.h"
#include "engine/dispatch/op_problem.h"

namespace anvil::harness {

// Reads one descriptor: errors are one line naming the op and the whole text.
class Reader {
 public:
  Reader(std::string_view op, std::string_view text) : op_(op), text_(text) {
    std::size_t colon = text.find(':');
    body_ = text.substr(0, colon);
    while (colon != std::string_view::npos) {
      const std::size_t next = text.find(':', colon + 1);
      parts_.emplace_back(text.substr(
          colon + 1, next == std::string_view::npos ? std::string_view::npos : next - colon - 1));
      colon = next;
    }
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("bad " + op_ + " descriptor '" + text_ + "': " + what);
  }

  std::string_view body() const { return body_; }

  std::int64_t integer(std::string_view digits, const std::string& after) const {
    if (digits.empty()) fail("missing number after '" + after + "'");
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec == std::errc::result_out_of_range)
      fail("the number after '" + after + "' overflows (" + std::string(digits) + ")");
    if (ec != std::errc() || end != digits.data() + digits.size())
      fail("missing number after '" + after + "' (got '" + std::string(digits) + "')");
    return v;
  }

  // benchdnn-style letters and numbers: "mb16ic64ih56" -> {mb: 16, ic: 64, ih: 56}, `_` ignored.
  std::map<std::string, std::int64_t> letters(const std::vector<std::string>& allowed) const {
    std::map<std::string, std::int64_t> out;
    std::size_t i = 0;
    const std::string_view s = body_;
    while (i < s.size()) {
      if (s[i] == '_') {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j < s.size() && s[j] >= 'a' && s[j] <= 'z') ++j;
      if (j == i) fail("expected a letter at '" + std::string(s.substr(i)) + "'");
      const std::string key(s.substr(i, j - i));
      bool known = false;
      std::string prefix;  // the longest letter that starts `key` ("ih" of "ihoc")
      for (const auto& a : allowed) {
        known = known || a == key;
        if (key.rfind(a, 0) == 0 && a.size() > prefix.size()) prefix = a;
      }
      if (!known && !prefix.empty()) fail("missing number after '" + prefix + "'");
      if (!known) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : " ") + a;
        fail(detail::str_cat("unknown letter '", key, "' (expected ", list, ")"));
      }
      std::size_t k = j;
      while (k < s.size() && s[k] >= '0' && s[k] <= '9') ++k;
      const std::int64_t v = integer(s.substr(j, k - j), key);
      if (!out.emplace(key, v).second) fail("'" + key + "' given twice");
      i = k;
    }
    return out;
  }

  // The `:` parts: each is consumed by take_word/take_number or by the common dtype/device
  // parts; finish() refuses what is left.
  bool take_word(std::string_view word) {
    for (auto it = parts_.begin(); it != parts_.end(); ++it)
      if (*it == word) {
        parts_.erase(it);
        return true;
      }
    return false;
  }
  // One of `words` (at most one may be given), or -1.
  int take_choice(const std::vector<std::string_view>& words) {
    int found = -1;
    for (std::size_t w = 0; w < words.size(); ++w)
      if (take_word(words[w])) {
        if (found >= 0)
          fail("both '" + std::string(words[static_cast<std::size_t>(found)]) + "' and '" +
               std::string(words[w]) + "' given");
        found = static_cast<int>(w);
      }
    return found;
  }
  // The number of a part "<name><number>", if given.
  std::optional<std::string> take_prefixed(std::string_view name) {
    for (auto it = parts_.begin(); it != parts_.end(); ++it) {
      if (it->rfind(name, 0) != 0 || it->size() == name.size()) continue;
      const char c = (*it)[name.size()];
      if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+')) continue;
      std::string v = it->substr(name.size());
      parts_.erase(it);
      return v;
    }
    return std::nullopt;
  }
  std::optional<std::int64_t> take_integer(std::string_view name) {
    auto v = take_prefixed(name);
    if (!v) return std::nullopt;
    return integer(*v, std::string(name));
  }
  std::optional<double> take_real(std::string_view name) {
    auto v = take_prefixed(name);
    if (!v) return std::nullopt;
    char* end = nullptr;
    const double d = std::strtod(v->c_str(), &end);
    if (v->empty() || end != v->c_str() + v->size())
      fail("missing number after '" + std::string(name) + "' (got '" + *v + "')");
    return d;
  }
  // f32 (the default) or f64; with `integers`, also i32 or i64.
  DType take_dtype(bool integers = false) {
    return integers ? take_dtype_of({DType::f32, DType::f64, DType::i32, DType::i64})
                    : take_dtype_of({DType::f32, DType::f64});
  }
  // conv2d and the pools also take the 16-bit types of autocast (Note [Autocast policy]).
  DType take_dtype_or_half() {
    return take_dtype_of({DType::f32, DType::f64, DType::bf16, DType::f16});
  }
  // The one of `types` (by dtype_name) given, or the first (f32) when none is.
  DType take_dtype_of(const std::vector<DType>& types) {
    std::vector<std::string_view> names;
    for (const DType t : types) names.push_back(dtype_name(t));
    const int found = take_choice(names);
    return found < 0 ? types.front() : types[static_cast<std::size_t>(found)];
  }
  Device take_device() {
    Device d = Device::cpu();
    int given = take_word("cpu") ? 1 : 0;
    for (auto it = parts_.begin(); it != parts_.end();) {
      if (it->rfind("cuda", 0) != 0) {
        ++it;
        continue;
      }
      const std::string idx = it->substr(4);
      d = Device::cuda(idx.empty() ? 0 : static_cast<int>(integer(idx, "cuda")));
      if (idx.size() > 3) fail("device index '" + idx + "' is out of range");
      ++given;
      it = parts_.erase(it);
    }
    if (given > 1) fail("more than one device given");
    return d;
  }
  // Refuses parts nobody took; `known` lists the op's own parts for the message.
  void finish(const std::string& known) const {
    if (!parts_.empty())
      fail("unknown part '" + parts_.front() + "' (expected " + known +
           ", f32 or f64, cpu, cuda or cudaN)");
  }

  // Runs a problem's own validation (anvil::Error) as a descriptor error.
  template <typename F>
  auto validated(F&& f) const {
    try {
      return f();
    } catch (const Error& e) {
      std::string m = e.what();
      for (char& c : m)
        if (c == '\n') c = ' ';
      fail(m);
    }
  }

 private:
  std::string op_;
  std::string text_;
  std::string_view body_;
  std::vector<std::string> parts_;
};

// The shortest of %g and %.17g that reads back exactly.
std::string real(double v);
// The dtype and device parts of a descriptor (empty for f32 on the CPU).
std::string common_parts(DType dtype, const Device& device);
// The number of letter `key` (a missing one fails), or `def`.
std::int64_t need(const Reader& r, const std::map<std::string, std::int64_t>& v, const char* key);
std::int64_t get(const std::map<std::string, std::int64_t>& v, const char* key, std::int64_t def);

// harness/memory_bound_descriptors.cpp: each writes the descriptor of a problem, or reads one.
std::string elementwise_descriptor(const ElementwiseProblem& p);
ElementwiseProblem parse_elementwise(Reader& r);
std::string reduce_descriptor(const ReduceProblem& p);
ReduceProblem parse_reduce(Reader& r);
std::string softmax_descriptor(const SoftmaxProblem& p);
SoftmaxProblem parse_softmax(Reader& r);
std::string embedding_descriptor(const EmbeddingProblem& p);
EmbeddingProblem parse_embedding(Reader& r);
std::string dropout_descriptor(const DropoutProblem& p);
DropoutProblem parse_dropout(Reader& r);
std::string optimizer_descriptor(const OptimizerProblem& p);
OptimizerProblem parse_optimizer(Reader& r, OptimOp op);

}  // namespace anvil::harness
