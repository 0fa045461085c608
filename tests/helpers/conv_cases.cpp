// SPDX-License-Identifier: Apache-2.0
// The conv2d shape notation of the tests (tests/helpers/conv_cases.h).
#include "helpers/conv_cases.h"

namespace anvil::test {

ConvProblem conv_problem_of(const ConvCase& cc, ConvPass pass, DType dtype, bool bias, bool relu) {
  ConvProblem p;
  p.pass = pass;
  p.dtype = dtype;
  p.n = cc.n;
  p.c = cc.c;
  p.h = cc.h;
  p.w = cc.w;
  p.k = cc.k;
  p.r = cc.r;
  p.s = cc.s;
  p.stride_h = cc.sh;
  p.stride_w = cc.sw;
  p.pad_h = cc.ph;
  p.pad_w = cc.pw;
  p.dil_h = cc.dh;
  p.dil_w = cc.dw;
  p.groups = cc.groups;
  p.has_bias = bias;
  p.fuse_relu = relu && pass == ConvPass::forward;
  return p;
}

}  // namespace anvil::test
