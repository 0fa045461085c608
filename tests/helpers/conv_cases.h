// SPDX-License-Identifier: Apache-2.0
#pragma once
// A compact notation for conv2d shapes in the tests (tests/test_conv.cpp): one struct and the
// problem of one pass. The shape lists that every variant runs, their inputs and the check
// against `ref` are the conv2d driver's (harness/drivers/conv2d_driver.cpp).
#include <cstdint>

#include "engine/dispatch/conv_problem.h"

namespace anvil::test {

// One conv2d shape: N C H W input, K R S filter, stride, padding, dilation, groups.
struct ConvCase {
  const char* name;
  std::int64_t n, c, h, w, k, r, s;
  std::int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
};

// The problem of one pass of `cc` (on the CPU; set .device for another).
ConvProblem conv_problem_of(const ConvCase& cc, ConvPass pass, DType dtype, bool bias, bool relu);

}  // namespace anvil::test
