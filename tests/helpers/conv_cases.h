// SPDX-License-Identifier: Apache-2.0
#pragma once
// conv2d test problems and the conv2d variant check, shared by the CPU and GPU conv tests
// (tests/test_conv.cpp, tests/cuda/test_cuda_conv.cpp, tests/test_im2col_index.cpp): one list of
// odd shapes, and one function that runs every variant of a harness's device on the three passes
// of a problem against `ref` in f64 on the host (tests/helpers/variant_harness.h), with the
// tolerance rule of the calling test.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/dispatch/conv_problem.h"
#include "helpers/variant_harness.h"

namespace anvil::test {

// One conv2d shape: N C H W input, K R S filter, stride, padding, dilation, groups.
struct ConvCase {
  const char* name;
  std::int64_t n, c, h, w, k, r, s;
  std::int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
};

// The problem of one pass of `cc` (on the CPU; set .device for another).
ConvProblem conv_problem_of(const ConvCase& cc, ConvPass pass, DType dtype, bool bias, bool relu);

// The arguments of one conv2d call (null where a pass does not use a buffer).
ConvArgs conv_args(const ConvProblem& p, const void* x, const void* w, const void* b, void* y,
                   const void* dy, void* dx, void* dw, void* db);

// Small shapes with odd sizes that exercise every code path (wide and direct chunks, 1x1,
// groups, depthwise, asymmetric stride/padding/dilation, winograd-eligible, 5x5).
const std::vector<ConvCase>& odd_conv_cases();

// The bound on |variant - ref| for one output ("y", "dx", "dw" or "db") of a pass: `len` is the
// pass's reduction length, `scale` the product of its operands' largest magnitudes (for "db":
// max |dy|).
using ConvTolerance = std::function<double(const std::string& variant, ConvPass pass,
                                           const std::string& output, double len, double scale)>;

// Runs every variant of the harness's device (base.device) on the passes of `base` (dtype, bias
// and fused relu applied; relu only in the forward pass), each called directly on its ConvArgs
// with outputs pre-filled with NaN (an element left unwritten fails), and compares with `ref`
// run in f64 on the host on the same (dtype-rounded) values. Operands are U(-1, 1).
void check_conv_variants(VariantHarness& harness, ConvProblem base, DType dtype, bool bias,
                         bool relu, std::uint64_t seed, const ConvTolerance& tolerance,
                         const std::string& label = "");

}  // namespace anvil::test
