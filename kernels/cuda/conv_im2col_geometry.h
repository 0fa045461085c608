// SPDX-License-Identifier: Apache-2.0
#pragma once
// im2col_geometry_of: one sample and one group of a ConvProblem as the Im2colGeometry that
// cuda.custom.im2col's kernels index with (conv_im2col_index.h). Host code only and no CUDA
// header, so the variant (conv_im2col.cpp) and the CPU test of its index arithmetic
// (tests/test_im2col_index.cpp) build the geometry the same way.
#include "engine/dispatch/conv_problem.h"
#include "kernels/cuda/conv_im2col_index.h"

namespace anvil::cuda {

inline Im2colGeometry im2col_geometry_of(const ConvProblem& p) {
  Im2colGeometry g;
  g.cg = p.c_per_group();
  g.h = p.h;
  g.w = p.w;
  g.r = p.r;
  g.s = p.s;
  g.p = p.p();
  g.q = p.q();
  g.stride_h = p.stride_h;
  g.stride_w = p.stride_w;
  g.pad_h = p.pad_h;
  g.pad_w = p.pad_w;
  g.dil_h = p.dil_h;
  g.dil_w = p.dil_w;
  return g;
}

}  // namespace anvil::cuda
