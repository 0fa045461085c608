// SPDX-License-Identifier: Apache-2.0
#pragma once
// The op codes of the elementwise table (engine/dispatch/elementwise_problem.h), alone in their
// header so that the CUDA launcher (kernels/cuda/elementwise_kernels.h, C++17 for nvcc) takes
// the same enum as the table's problems.
#include <cstdint>

namespace anvil {

enum class EwOp : std::uint8_t {
  // unary
  neg,
  exp,
  log,
  sqrt,
  sigmoid,
  tanh,
  relu,
  abs,
  sign,
  // binary (out = a op b); add/sub compute a + alpha*b, a - alpha*b
  add,
  sub,
  mul,
  div,
  pow,
  maximum,
  gt,
  // with a scalar s
  add_scalar,
  mul_scalar,
  pow_scalar,
  rsub_scalar /* s - a */,
  rdiv_scalar /* s / a */,
  // backward helpers: a = saved value, b = incoming gradient
  sigmoid_backward /* b*a*(1-a), a = y */,
  tanh_backward /* b*(1-a*a), a = y */,
  relu_backward /* b*(a>0) */,
  pow_scalar_backward /* b*s*a^(s-1), a = x */,
};

// The number of op codes (they run from 0 without gaps).
inline constexpr int kEwOpCount = static_cast<int>(EwOp::pow_scalar_backward) + 1;

}  // namespace anvil
