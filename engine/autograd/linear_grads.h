// SPDX-License-Identifier: Apache-2.0
#pragma once
// The parameter gradients of a linear map y = x W^T + b, shared by linear and
// linear_cross_entropy: each returns the gradient, or applies the SGD step itself and returns
// an undefined tensor when the optimizer folded it into the backward (Note [Folded SGD]).
#include "engine/core/tensor.h"

namespace anvil::detail {

// dW = alpha dy^T x (TN), or W -= lr alpha dy^T x as one GEMM with beta = 1 when folded.
// `weight` is the parameter handle itself (folded_sgd_lr reads its autograd state).
Tensor linear_weight_grad(const Tensor& dy, const Tensor& x, const Tensor& weight, double alpha);
// db as given, or b -= lr db when folded.
Tensor linear_bias_grad(Tensor db, const Tensor& bias);

}  // namespace anvil::detail
