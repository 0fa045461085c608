// SPDX-License-Identifier: Apache-2.0
#pragma once
// Tensor-level 2-D batch normalisation without autograd: checks, allocation, dispatch to the
// batch_norm2d table, and the running-statistics update (PyTorch semantics). The differentiable
// version is anvil::batch_norm2d (engine/autograd/functions.h).
#include "engine/core/tensor.h"
#include "engine/dispatch/batch_norm_problem.h"

namespace anvil::ops {

struct BatchNormForward {
  Tensor y;                  // [N, C, H, W]
  Tensor mean, var;          // [C] the statistics y was normalised with (batch: biased var)
  BatchNormProblem problem;  // the forward problem
};

// Forward of batch norm. weight/bias may be undefined (then 1 and 0). running_mean/running_var
// [C] are read in eval mode and, when defined, updated in place in training mode:
//   running_mean = (1 - momentum) * running_mean + momentum * batch_mean
//   running_var  = (1 - momentum) * running_var  + momentum * batch_var * M / (M - 1)
// (M = N*H*W: the unbiased batch variance). Eval mode needs both running statistics.
BatchNormForward batch_norm2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                      const Tensor& running_mean, const Tensor& running_var,
                                      bool training, double momentum, double eps);

struct BatchNormGrads {
  Tensor dx, dweight, dbias;
};
// Gradients for the forward `fwd` (x and weight as given to it; weight may be undefined).
BatchNormGrads batch_norm2d_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                     const BatchNormForward& fwd);

}  // namespace anvil::ops
