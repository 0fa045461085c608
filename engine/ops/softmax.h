// SPDX-License-Identifier: Apache-2.0
#pragma once
// Softmax family without autograd (last dimension; f32/f64; on the input's device).
#include "engine/core/tensor.h"

namespace anvil::ops {

Tensor softmax(const Tensor& x);      // over the last dim
Tensor log_softmax(const Tensor& x);  // over the last dim
// dx from y = (log_)softmax(x) and dy.
Tensor softmax_backward(const Tensor& y, const Tensor& dy, bool log);

// Fused softmax cross-entropy over logits [N, C] and class ids [N] (i64 or i32):
// returns per-row losses [N] and the row log-sum-exps [N] (saved for backward).
std::pair<Tensor, Tensor> cross_entropy_forward(const Tensor& logits, const Tensor& target);
// d(loss)/d(logits) scaled by `scale` (1/N for the mean, times the incoming gradient) and, when
// defined, by the one value of `scale_by`: on a GPU that value is read by the kernel, so the
// incoming gradient never travels to the host (Note [Host waits in a step]).
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse,
                              double scale, const Tensor& scale_by = Tensor());

// cross_entropy_forward that also returns the unscaled logit gradient
// grad = softmax(logits) - onehot(target) [N, C] and, with col_sums, its column sums [C]
// (Note [Linear cross-entropy]). in_place writes grad over `logits` itself (which must be
// dense; its values are gone afterwards); CPU only.
struct CrossEntropyWithGrad {
  Tensor losses, lse, grad, col_sums;
};
CrossEntropyWithGrad cross_entropy_forward_grad(const Tensor& logits, const Tensor& target,
                                                bool in_place, bool col_sums);

}  // namespace anvil::ops
