// SPDX-License-Identifier: Apache-2.0
// softmax, log_softmax and the fused softmax cross-entropy, with their backward passes.
#include "engine/autograd/autocast.h"
#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"
#include "engine/core/views.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"

namespace anvil {
namespace {
using Grads = std::vector<Tensor>;

Tensor softmax_family(const Tensor& x, std::int64_t dim, bool log) {
  check_defined(x, log ? "log_softmax" : "softmax", "input");
  const std::int64_t d =
      wrap_dim(dim, std::max<std::int64_t>(x.dim(), 1), log ? "log_softmax" : "softmax");
  if (x.dim() > 0 && d != x.dim() - 1)  // move `dim` last, compute, move it back
    return softmax_family(x.transpose(d, -1), -1, log).transpose(d, -1);
  Tensor out = log ? ops::log_softmax(x) : ops::softmax(x);
  if (any_requires_grad({&x})) {
    const Tensor od = out.detach();
    record(log ? "LogSoftmaxBackward" : "SoftmaxBackward", {x}, {out},
           [od, log](const Grads& g) { return Grads{ops::softmax_backward(od, g[0], log)}; });
  }
  return out;
}
}  // namespace

// Note [Autocast policy]: the softmax family is on the FP32 list.
Tensor softmax(const Tensor& x, std::int64_t dim) {
  return softmax_family(autocast_input("softmax", x), dim, false);
}
Tensor log_softmax(const Tensor& x, std::int64_t dim) {
  return softmax_family(autocast_input("log_softmax", x), dim, true);
}

Tensor cross_entropy(const Tensor& logits_in, const Tensor& target) {
  const Tensor logits = autocast_input("cross_entropy", logits_in);
  auto [losses, lse] = ops::cross_entropy_forward(logits, target);
  const std::int64_t n = logits.sizes()[0];
  // The mean of the per-row losses on their device (a CUDA loss never visits the host here).
  Tensor loss = n > 0 ? ops::mean(losses) : Tensor::full({}, 0.0, logits.dtype(), logits.device());
  if (any_requires_grad({&logits})) {
    const Tensor xd = logits.detach(), td = target.detach(), lsed = lse;
    record("CrossEntropyBackward", {logits}, {loss}, [xd, td, lsed, n](const Grads& g) {
      // g[0] stays where it is (no device -> host copy inside a GPU step).
      const double scale = 1.0 / static_cast<double>(std::max<std::int64_t>(n, 1));
      return Grads{ops::cross_entropy_backward(xd, td, lsed, scale, g[0])};
    });
  }
  return loss;
}

}  // namespace anvil
