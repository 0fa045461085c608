// SPDX-License-Identifier: Apache-2.0
#pragma once
// anvil::Error and the helpers that build its messages.
// Every failure in the library is an exception whose message names the function and the
// offending values ("gemm: K mismatch, A is [64,7] but B is [9,3]"); nothing calls exit/abort.
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace anvil {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A knob out of its range: an option, an environment variable or a setting such as a thread
// count that the caller chose. The library throws it like any Error; the `anvil` tool turns it
// into a usage error (exit status 2) instead of a failed run (1).
class ConfigError : public Error {
 public:
  using Error::Error;
};

namespace detail {
// Concatenates anything with operator<< into one string.
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

// Throws anvil::Error("<where>: <message...>").
template <typename... Args>
[[noreturn]] void fail(const char* where, Args&&... args) {
  throw Error(detail::str_cat(where, ": ", std::forward<Args>(args)...));
}

// Throws anvil::ConfigError("<where>: <message...>").
template <typename... Args>
[[noreturn]] void fail_config(const char* where, Args&&... args) {
  throw ConfigError(detail::str_cat(where, ": ", std::forward<Args>(args)...));
}

}  // namespace anvil

// ANVIL_CHECK(cond, "where", parts...): throws anvil::Error when cond is false.
#define ANVIL_CHECK(cond, where, ...)               \
  do {                                              \
    if (!(cond)) ::anvil::fail(where, __VA_ARGS__); \
  } while (0)

// ANVIL_CHECK_CONFIG(cond, "where", parts...): throws anvil::ConfigError when cond is false.
#define ANVIL_CHECK_CONFIG(cond, where, ...)               \
  do {                                                     \
    if (!(cond)) ::anvil::fail_config(where, __VA_ARGS__); \
  } while (0)
