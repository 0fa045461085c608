// SPDX-License-Identifier: Apache-2.0
#pragma once
// Scalars of saved training state as text (Note [Optimizer state]): doubles written so that they
// read back to the same bits, and numbers read back with an error naming the key. Shared by the
// optimizers and the loss scaler (engine/optim/optimizer.cpp, grad_scaler.cpp); not a public API.
#include <charconv>
#include <map>
#include <string>

#include "engine/core/error.h"

namespace anvil::optim::detail {

using Metadata = std::map<std::string, std::string>;

// Shortest text that reads back to the same double (std::to_chars guarantees the round trip).
inline std::string text_of(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

inline const std::string& entry(const Metadata& md, const std::string& key, const char* where) {
  const auto it = md.find(key);
  ANVIL_CHECK(it != md.end(), where, "the state has no '", key, "'");
  return it->second;
}

template <typename T>
T read_number(const Metadata& md, const std::string& key, const char* where) {
  const std::string& s = entry(md, key, where);
  T v{};
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  ANVIL_CHECK(r.ec == std::errc() && r.ptr == s.data() + s.size(), where, "state '", key, "' = \"",
              s, "\" is not a number");
  return v;
}

}  // namespace anvil::optim::detail
