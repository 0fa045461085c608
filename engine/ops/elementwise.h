// SPDX-License-Identifier: Apache-2.0
#pragma once
// Tensor-level pointwise ops without autograd: allocate the output, broadcast, check dtypes
// and devices, then run the selected `elementwise` variant. Differentiable versions are in
// engine/autograd/functions.h.
#include "engine/core/tensor.h"
#include "engine/dispatch/elementwise_problem.h"

namespace anvil::ops {

// out = op(a) for unary ops; out = op(a, b) (broadcast) for binary ones.
Tensor unary(EwOp op, const Tensor& a, double scalar = 0.0);
Tensor binary(EwOp op, const Tensor& a, const Tensor& b, double alpha = 1.0, double scalar = 0.0);
// Writes into `out` (which may alias a, for in-place updates); a/b broadcast to out's shape.
void binary_into(EwOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha = 1.0,
                 double scalar = 0.0);
void unary_into(EwOp op, const Tensor& out, const Tensor& a, double scalar = 0.0);

inline Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0) {
  return binary(EwOp::add, a, b, alpha);
}
inline Tensor sub(const Tensor& a, const Tensor& b) { return binary(EwOp::sub, a, b); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return binary(EwOp::mul, a, b); }
inline Tensor div(const Tensor& a, const Tensor& b) { return binary(EwOp::div, a, b); }
inline Tensor mul_scalar(const Tensor& a, double s) { return unary(EwOp::mul_scalar, a, s); }
inline Tensor add_scalar(const Tensor& a, double s) { return unary(EwOp::add_scalar, a, s); }

// dst += alpha * src (src broadcast to dst's shape).
void add_(const Tensor& dst, const Tensor& src, double alpha = 1.0);
// dst *= s.
void mul_scalar_(const Tensor& dst, double s);

}  // namespace anvil::ops
