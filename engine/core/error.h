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

}  // namespace anvil

// ANVIL_CHECK(cond, "where", parts...): throws anvil::Error when cond is false.
#define ANVIL_CHECK(cond, where, ...)               \
  do {                                              \
    if (!(cond)) ::anvil::fail(where, __VA_ARGS__); \
  } while (0)
