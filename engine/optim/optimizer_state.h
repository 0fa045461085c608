// SPDX-License-Identifier: Apache-2.0
#pragma once
// Optimizer and scheduler state (Note [Optimizer state] in optimizer.cpp): scalars as text,
// doubles written so that they read back to the same bits, readers that name the key and the
// text when an entry is missing or malformed, and the sorting of saved per-parameter tensors.
// Internal to engine/optim.
#include <charconv>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/tensor.h"

namespace anvil::optim::detail {

using Metadata = std::map<std::string, std::string>;

// Shortest text that reads back to the same double (std::to_chars guarantees the round trip).
std::string text_of(double v);

// The value of `key`; throws "<where>: the state has no '<key>'".
const std::string& entry(const Metadata& md, const std::string& key, const char* where);

template <typename T>
T read_number(const Metadata& md, const std::string& key, const char* where) {
  const std::string& s = entry(md, key, where);
  T v{};
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  ANVIL_CHECK(r.ec == std::errc() && r.ptr == s.data() + s.size(), where, "state '", key, "' = \"",
              s, "\" is not a number");
  return v;
}

bool read_bool(const Metadata& md, const std::string& key, const char* where);

// The entries of `md` whose key starts with `prefix`, without it.
Metadata with_prefix_removed(const Metadata& md, const std::string& prefix);

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Sorts `tensors` named "<prefixes[k]><i>" into slots[k][i] as fresh copies on the parameter's
// device, checking every name, index, shape and dtype against `params`. Nothing is changed on
// error, so load_state can commit afterwards.
std::vector<std::vector<Tensor>> collect_state(const NamedTensors& tensors,
                                               const std::vector<std::string>& prefixes,
                                               const std::vector<Tensor>& params,
                                               const char* where);

// A grouped constructor's parts: the groups' tensors (moved out; the base class takes them
// first) and their options (a group without options takes `defaults`).
template <typename Group>
std::vector<std::vector<Tensor>> tensors_of(std::vector<Group>& groups) {
  std::vector<std::vector<Tensor>> out;
  out.reserve(groups.size());
  for (auto& g : groups) out.push_back(std::move(g.params));
  return out;
}
template <typename Group, typename Options>
std::vector<Options> options_of(const std::vector<Group>& groups, const Options& defaults) {
  std::vector<Options> out;
  out.reserve(groups.size());
  for (const auto& g : groups) out.push_back(g.options.value_or(defaults));
  return out;
}

}  // namespace anvil::optim::detail
