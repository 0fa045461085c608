// SPDX-License-Identifier: Apache-2.0
#pragma once
// Tensor-level 2-D pooling without autograd: checks, output allocation, dispatch to the
// max_pool2d / avg_pool2d / adaptive_avg_pool2d tables. Differentiable versions are in
// engine/autograd/functions.h (max_pool2d, avg_pool2d, adaptive_avg_pool2d, global_avg_pool2d).
#include <array>
#include <string>

#include "engine/core/tensor.h"
#include "engine/dispatch/pool_problem.h"

namespace anvil::ops {

// What a forward leaves for its backward.
struct PoolForward {
  Tensor y;             // [N, C, OH, OW]
  PoolProblem problem;  // the forward problem (its pass says whether it was a training forward)
  Tensor workspace;     // max pooling, training forward: the producing variant's record
  std::string variant;  // the variant that ran (max backward must run the same one)
};

// The forward problem of `kind` for x (validated; throws naming `where`).
PoolProblem pool2d_problem(PoolKind kind, const Tensor& x, std::array<std::int64_t, 2> kernel,
                           std::array<std::int64_t, 2> stride, std::array<std::int64_t, 2> padding,
                           bool ceil_mode, bool count_include_pad, const char* where);
PoolProblem adaptive_avg_pool2d_problem(const Tensor& x, std::array<std::int64_t, 2> output_size,
                                        const char* where);

// Runs the forward of `problem` on x (x is made dense if it is not). With training, the pass is
// forward_training (max pooling then keeps its workspace for pool2d_backward).
PoolForward pool2d_forward(const Tensor& x, const PoolProblem& problem, bool training);
// dx [N, C, H, W] from dy [N, C, OH, OW] for the forward `fwd` (a training forward for max).
Tensor pool2d_backward(const Tensor& dy, const PoolForward& fwd);

}  // namespace anvil::ops
