// SPDX-License-Identifier: Apache-2.0
#pragma once
// Tensor-level 2-D convolution without autograd: argument checks with clear errors, output
// allocation, and one run of the `conv2d` variant table per pass (engine/dispatch/conv_problem.h).
// Inputs may be any layout (made contiguous); outputs are new contiguous NCHW / KCRS tensors.
#include <array>
#include <cstdint>
#include <utility>

#include "engine/core/tensor.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/ops/conv_options.h"

namespace anvil::ops {

// Checks x [N, C, H, W], weight [K, C/groups, R, S] and bias ([K] or undefined) and returns the
// forward problem. Throws anvil::Error naming `where` ("conv2d: expected 4-D input (N,C,H,W),
// got [3,224,224]"). N == 0 is allowed (the ops then return empty results).
ConvProblem conv2d_problem(const Tensor& x, const Tensor& weight, const Tensor& bias,
                           const Conv2dOptions& params, const char* where = "conv2d");

// The same checks on shapes alone (for nn::Conv2d::output_shape and problems).
ConvProblem conv2d_problem(const Shape& x, const Shape& weight, bool has_bias,
                           const Conv2dOptions& params, DType dtype = DType::f32,
                           const char* where = "conv2d");

// y = conv2d(x, weight) + bias, then relu when `relu`. The relu is fused into the kernel when
// the variant selected for the plain convolution also supports the fused problem; otherwise it
// runs as a separate pass. `fused` (optional) reports which happened.
Tensor conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                      const Conv2dOptions& params, bool relu = false, bool* fused = nullptr);

// dx [N, C, H, W] from dy [N, K, P, Q] and weight.
Tensor conv2d_backward_data(const Tensor& dy, const Tensor& weight, const Shape& x_shape,
                            const Conv2dOptions& params);

// {dw [K, C/groups, R, S], db [K] (undefined unless with_bias)} from x and dy.
std::pair<Tensor, Tensor> conv2d_backward_weights(const Tensor& x, const Tensor& dy,
                                                  const Shape& weight_shape, bool with_bias,
                                                  const Conv2dOptions& params);

}  // namespace anvil::ops
