// SPDX-License-Identifier: Apache-2.0
#pragma once
// parse_number<T>(text): the whole of `text` as a T, or nothing. The one checked parser for
// numbers that come from users and files (options, environment variables, checkpoint metadata):
// unlike std::stoi it never throws a bare "stoi", and unlike std::strtoul it refuses what it
// cannot represent. std::from_chars rules: no leading spaces or '+', no '-' for unsigned types,
// no trailing characters, nothing out of T's range; for floating point "inf" and "nan" parse,
// so callers that need a finite value check it.
#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace anvil {

template <typename T>
std::optional<T> parse_number(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace anvil
