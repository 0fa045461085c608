// SPDX-License-Identifier: Apache-2.0
#pragma once
// Square pooling options in one call, for the CPU and GPU pooling tests (tests/test_pool_bn.cpp,
// tests/cuda/test_cuda_pool_bn.cpp). Header-only, so that every test target can use it.
#include <cstdint>

#include "engine/autograd/functions.h"

namespace anvil::test {

// A k x k window, stride s, padding p on both sides.
inline Pool2dOptions pool_options(std::int64_t k, std::int64_t s, std::int64_t p = 0,
                                  bool ceil = false, bool include_pad = true) {
  Pool2dOptions o;
  o.kernel = {k, k};
  o.stride = {s, s};
  o.padding = {p, p};
  o.ceil_mode = ceil;
  o.count_include_pad = include_pad;
  return o;
}

}  // namespace anvil::test
