// SPDX-License-Identifier: Apache-2.0
#pragma once
// oneDNN failures as anvil::Error, for every oneDNN variant (kernels/cpu/onednn/*.cpp): one
// message shape, "<variant>: <step> for <problem> failed with <status>: <oneDNN's message>".
// `step` names the call or what was being done ("executing the matmul primitive"), `problem` is
// the problem's one-line repro. (No file:line: std::source_location is beyond clang-tidy 14's
// parser with Debian 12's libstdc++, and variant + step already locate the call.)
#include <string_view>

#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_debug.h>

#include "engine/core/error.h"

namespace anvil::kernels::onednn {

// A status returned by oneDNN's C API (dnnl_sgemm, ...), with oneDNN's message when there is one.
[[noreturn]] inline void fail_status(std::string_view variant, std::string_view step,
                                     std::string_view problem, dnnl_status_t status,
                                     std::string_view what = {}) {
  throw Error(detail::str_cat(variant, ": ", step, " for ", problem, " failed with ",
                              dnnl_status2str(status), what.empty() ? "" : ": ", what));
}

// A dnnl::error thrown by oneDNN's C++ API: `catch (const dnnl::error& err) { fail_status(...,
// err); }`.
[[noreturn]] inline void fail_status(std::string_view variant, std::string_view step,
                                     std::string_view problem, const dnnl::error& err) {
  fail_status(variant, step, problem, err.status, err.what());
}

}  // namespace anvil::kernels::onednn
