// SPDX-License-Identifier: Apache-2.0
#pragma once
// The op codes of the elementwise table (engine/dispatch/elementwise_problem.h) with their arity
// and integer support, alone in their header so that the CUDA kernels
// (kernels/cuda/elementwise_kernels.h and .cu, C++17 for nvcc) use the same enum and tables as
// the table's problems.
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

// Number of tensor inputs (1 or 2) of an op. constexpr, so that the CUDA kernels use it too (in
// constant expressions only: nvcc calls no host function from device code).
constexpr int ew_arity(EwOp op) {
  switch (op) {
    case EwOp::add:
    case EwOp::sub:
    case EwOp::mul:
    case EwOp::div:
    case EwOp::pow:
    case EwOp::maximum:
    case EwOp::gt:
    case EwOp::sigmoid_backward:
    case EwOp::tanh_backward:
    case EwOp::relu_backward:
    case EwOp::pow_scalar_backward:
      return 2;
    default:
      return 1;
  }
}

// True for ops defined on integer dtypes too (neg, abs, sign, add, sub, mul, the scalar add/mul,
// maximum, gt).
constexpr bool ew_allows_integers(EwOp op) {
  switch (op) {
    case EwOp::neg:
    case EwOp::abs:
    case EwOp::add:
    case EwOp::sub:
    case EwOp::mul:
    case EwOp::add_scalar:
    case EwOp::mul_scalar:
    case EwOp::maximum:
    case EwOp::gt:
    case EwOp::sign:
      return true;
    default:
      return false;
  }
}

// The number of op codes (they run from 0 without gaps).
inline constexpr int kEwOpCount = static_cast<int>(EwOp::pow_scalar_backward) + 1;

}  // namespace anvil
