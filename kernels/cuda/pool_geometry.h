// SPDX-License-Identifier: Apache-2.0
#pragma once
// pool_geometry_of: the dispatch layer's PoolProblem flattened into the PoolGeometry that the
// cuda.custom pooling kernels index with (pool_window.h). Host code only and no CUDA header, so
// the registration (pool_register.cpp) and the CPU test of the kernels' element functions
// (tests/test_cuda_pool_kernel_logic.cpp) build the geometry the same way.
#include "engine/dispatch/pool_problem.h"
#include "kernels/cuda/pool_window.h"

namespace anvil::cuda {

inline PoolGeometry pool_geometry_of(const PoolProblem& p) {
  PoolGeometry g;
  g.kind = p.kind == PoolKind::max   ? PoolCode::max
           : p.kind == PoolKind::avg ? PoolCode::avg
                                     : PoolCode::adaptive_avg;
  g.planes = p.planes();
  g.h = p.h;
  g.w = p.w;
  g.oh = p.oh;
  g.ow = p.ow;
  g.kh = p.kh;
  g.kw = p.kw;
  g.sh = p.sh;
  g.sw = p.sw;
  g.ph = p.ph;
  g.pw = p.pw;
  g.count_include_pad = p.count_include_pad;
  return g;
}

}  // namespace anvil::cuda
