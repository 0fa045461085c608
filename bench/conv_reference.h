// SPDX-License-Identifier: Apache-2.0
#pragma once
// The double-precision check of a conv2d pass's output that the kernel/conv2d benchmarks run
// before timing (bench/kernel_bench_conv.cpp, and the GPU ones in bench/gpu_conv_bench.cpp):
// host buffers of one (problem, pass) and sampled entries recomputed from the definition.
#include <string>

#include "engine/core/tensor.h"
#include "engine/dispatch/conv_problem.h"

namespace anvil::bench::kernel {

// Inputs and the output of one (problem, pass), on the host, kept while consecutive benchmarks
// (the variants and thread counts of that pass) use them; released when another pass or problem
// comes.
struct ConvBuffers {
  std::string id;
  Tensor x, w, b, dy;  // inputs (x and w from the definition, dy for backward passes)
  Tensor out, out_db;  // y / dx / dw, and db
};

// The host buffers for `id` (one set at a time: a new id frees the previous one first). f32,
// uniform in [-1, 1); outputs uninitialised.
ConvBuffers& buffers_for(const std::string& id, const ConvProblem& p);

// "" when `samples` entries of buf.out (always including the first and the last), and 8 of
// buf.out_db for a backward_weights pass with bias, match the definition in double within
// scale x 1e-5 x sum|terms| + 1e-6; else the first mismatch with both values.
std::string sampled_mismatch(const ConvProblem& p, const ConvBuffers& buf, double scale,
                             int samples = 48);

}  // namespace anvil::bench::kernel
