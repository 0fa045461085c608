// SPDX-License-Identifier: Apache-2.0
// Batch normalisation (2-D, per channel) with its backward for x, weight and bias.
// Training mode normalises with the batch statistics, so the gradient of x flows through them;
// eval mode normalises with the running statistics, constants for the gradient. The running
// statistics are updated in training mode whatever the grad mode (as PyTorch), by
// ops::batch_norm2d_forward, and are never differentiated.
#include <memory>

#include "engine/autograd/autocast.h"
#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"
#include "engine/ops/batch_norm.h"

namespace anvil {

Tensor batch_norm2d(const Tensor& x_in, const Tensor& weight, const Tensor& bias,
                    const Tensor& running_mean, const Tensor& running_var, bool training,
                    double momentum, double eps) {
  // A 16-bit activation is normalised in f32 (Note [Autocast policy]); the parameters and the
  // running statistics are f32 already.
  const Tensor x = autocast_input("batch_norm2d", x_in);
  auto fwd = std::make_shared<ops::BatchNormForward>(ops::batch_norm2d_forward(
      x, weight, bias, running_mean, running_var, training, momentum, eps));
  Tensor y = fwd->y;
  fwd->y = Tensor();  // not needed by the backward (and never saved: Note [Autograd graph])
  if (any_requires_grad({&x, &weight, &bias})) {
    const Tensor xd = x.detach(), wd = weight.defined() ? weight.detach() : Tensor();
    const bool gx = x.requires_grad(), gw = weight.defined() && weight.requires_grad(),
               gb = bias.defined() && bias.requires_grad();
    record("BatchNorm2dBackward", {x, weight, bias}, {y},
           [fwd, xd, wd, gx, gw, gb](const std::vector<Tensor>& g) {
             ops::BatchNormGrads r = ops::batch_norm2d_backward(g[0], xd, wd, *fwd);
             return std::vector<Tensor>{gx ? r.dx : Tensor(), gw ? r.dweight : Tensor(),
                                        gb ? r.dbias : Tensor()};
           });
  }
  return y;
}

}  // namespace anvil
