// SPDX-License-Identifier: Apache-2.0
// conv2d and conv2d_relu with their backward (dx by backward-data, dw and db by
// backward-weights), all three through the conv2d variant table (engine/ops/conv.h). Under
// autocast both run in the low precision (Note [Autocast policy]).
//
// Note [Fused conv relu]
// conv2d_relu records one node for relu(conv(x, w) + b). Its backward masks the incoming
// gradient with y > 0 (y = the saved relu output: y > 0 exactly where the pre-activation is),
// then runs the two convolution backward passes. Whether the forward ran fused (a variant with
// a relu post-op) or as conv then relu does not change y, so the gradients are the same.
#include "engine/autograd/autocast.h"
#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"

namespace anvil {
namespace {

using Grads = std::vector<Tensor>;

Tensor conv2d_impl(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in,
                   const Conv2dOptions& options, bool relu) {
  // The casts are recorded ops: dw and db come back to f32 parameters in f32.
  const Tensor x = autocast_input("conv2d", x_in), weight = autocast_input("conv2d", weight_in);
  const Tensor bias = autocast_input("conv2d", bias_in);
  Tensor y = ops::conv2d_forward(x, weight, bias, options, relu);
  if (any_requires_grad({&x, &weight, &bias})) {
    const Tensor xd = x.detach(), wd = weight.detach();
    const Tensor yd = relu ? y.detach() : Tensor();
    const bool gx = x.requires_grad(), gw = weight.requires_grad();
    const bool gb = bias.defined() && bias.requires_grad();
    record(relu ? "Conv2dReluBackward" : "Conv2dBackward", {x, weight, bias}, {y},
           [xd, wd, yd, gx, gw, gb, options](const Grads& g) {
             // Note [Fused conv relu]: the relu's gradient first.
             const Tensor dy = yd.defined() ? ops::binary(EwOp::relu_backward, yd, g[0]) : g[0];
             Grads out(3);
             if (gx) out[0] = ops::conv2d_backward_data(dy, wd, xd.sizes(), options);
             if (gw) {
               auto [dw, db] = ops::conv2d_backward_weights(xd, dy, wd.sizes(), gb, options);
               out[1] = dw;
               out[2] = db;
             } else if (gb) {
               out[2] = ops::sum(dy, {0, 2, 3});
             }
             return out;
           });
  }
  return y;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const Conv2dOptions& options) {
  return conv2d_impl(x, weight, bias, options, false);
}

Tensor conv2d_relu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const Conv2dOptions& options) {
  return conv2d_impl(x, weight, bias, options, true);
}

}  // namespace anvil
