// SPDX-License-Identifier: Apache-2.0
// linear_cross_entropy: cross_entropy(linear(x, W, b), target) as one autograd node.
//
// Note [Linear cross-entropy]
// A language model's decoder and loss, composed, hold two [N, C] buffers in the backward (the
// logits, saved by the cross-entropy, and dlogits) and pass over them three more times after
// the GEMMs: the log-sum-exp (forward), exp(x - lse) scaled into dlogits (backward) and the
// column sums of dlogits for the bias gradient. With the two ops as one node:
//  * forward: the logits go into a buffer nobody else sees; the cross-entropy kernel computes
//    each row's loss and, while the row is still in cache, overwrites it with the UNSCALED
//    gradient D = softmax(z) - onehot(target), summing D's columns on the way (when the bias
//    needs a gradient). The exp of the backward moves here, the column-sum pass disappears.
//  * backward: with s = g / N (the incoming gradient of the mean), dx = s D W, dW = s D^T x and
//    db = s colsum(D): the scale rides in the GEMMs' alpha, so nothing walks D but the GEMMs.
//    D is never modified, so a retained graph can run backward again.
// So one [N, C] buffer instead of two (lstm32 training: allocator peak 393 -> 251 MB, resident
// peak ~500 -> ~345 MB) and one pass over it instead of three (lstm32 training step, composed vs
// fused in one process: 0.986 -> 0.919 s at 1 thread, 0.508 -> 0.490 s at 2, dev VM). The
// price: D is computed even when only the loss's value is needed, so the fused path is taken
// only when a gradient is required; otherwise (and on devices without the kernel) it is the
// two ops composed, with the same values.
#include "engine/autograd/autocast.h"
#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/linear_grads.h"
#include "engine/core/transpose.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/gemm.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"

namespace anvil {
namespace {

// Note [Decoder weight gradient, transposed]
// dW [C, in] = s D^T x is a TN GEMM with a tall, narrow C (C = 10000 classes, in = 256 for the
// language models). Its transpose dW^T [in, C] = s x^T D is the same FLOPs with a short, wide C,
// which oneDNN's sgemm runs faster; moving the result into place is a 10 MB transpose. Decoder of
// LSTM-64 (D [8192, 10000], x [8192, 256]), dev VM, medians of 7, two rounds: 1 thread
// 412.6 / 415.2 ms direct vs 393.0 / 391.4 ms + 6.4-7.6 ms transpose; 2 threads 210.0 / 212.0 vs
// 197.0 / 198.5 + 4.2-4.8 ms; at LSTM-32's 4096 rows the two are within 1-3 %. The LSTM-64
// training step (medians of 12-14 steps per process, three processes of each build
// interleaved): 1 thread 1.829 / 1.887 / 1.880 -> 1.790 / 1.869 / 1.849 s, 2 threads 0.976 /
// 0.952 / 0.927 -> 0.959 / 0.920 / 0.897 s; LSTM-32's step: within the noise. The same rule as
// the LSTM's weight gradients (Note [Transposed weight gradients], lstm_fused.cpp): taken when
// in < C and in >= 128, and never when SGD is folded into the GEMM (that one writes W in place).
Tensor decoder_weight_grad(const Tensor& d, const Tensor& x, const Tensor& weight, double s) {
  const std::int64_t out_f = weight.sizes()[0], in_f = weight.sizes()[1];
  const bool transposed = folded_sgd_lr(weight) <= 0 && x.device().is_cpu() && in_f >= 128 &&
                          in_f < out_f && (x.dtype() == DType::f32 || x.dtype() == DType::f64);
  if (!transposed) return detail::linear_weight_grad(d, x, weight, s);  // s D^T x (TN)
  Tensor dwt = Tensor::empty({in_f, out_f}, x.dtype(), x.device());
  ops::gemm(x, true, d, false, dwt, s, 0.0);  // s x^T D
  Tensor dw = Tensor::empty({out_f, in_f}, x.dtype(), x.device());
  if (x.dtype() == DType::f32)
    transpose_2d(dwt.data<float>(), in_f, out_f, out_f, dw.data<float>(), in_f);
  else
    transpose_2d(dwt.data<double>(), in_f, out_f, out_f, dw.data<double>(), in_f);
  return dw;
}

}  // namespace

Tensor linear_cross_entropy(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in,
                            const Tensor& target) {
  const char* where = "linear_cross_entropy";
  // On the FP32 list as a whole (Note [Autocast policy]): the logits feed a softmax, and the
  // unfused path below must not run its linear in the low precision either.
  const Tensor x = autocast_input(where, x_in), weight = autocast_input(where, weight_in);
  const Tensor bias = autocast_input(where, bias_in);
  const AutocastGuard fp32_inside(Precision::fp32);
  check_defined(x, where, "input");
  check_defined(weight, where, "weight");
  check_defined(target, where, "target");
  ANVIL_CHECK(x.dim() == 2 && weight.dim() == 2, where,
              "expected input [N, in] and weight [C, in], got ", shape_str(x.sizes()), " and ",
              shape_str(weight.sizes()));
  const bool fused = x.device().is_cpu() && any_requires_grad({&x, &weight, &bias});
  if (!fused) return cross_entropy(linear(x, weight, bias), target);

  const Tensor xd = x.detach(), wd = weight.detach();
  Tensor logits;
  {
    NoGradGuard no_grad;  // linear's own checks and GEMM (bias folded or not), no node
    logits = linear(xd, wd, bias.defined() ? bias.detach() : Tensor());
  }
  const bool gx = x.requires_grad(), gw = weight.requires_grad();
  const bool gb = bias.defined() && bias.requires_grad();
  // logits is ours alone (a fresh dense buffer): D overwrites it (Note [Linear cross-entropy]).
  ops::CrossEntropyWithGrad ce = ops::cross_entropy_forward_grad(logits, target, true, gb);
  const std::int64_t n = logits.sizes()[0];
  Tensor loss =
      n > 0 ? ops::mean(ce.losses) : Tensor::full({}, 0.0, logits.dtype(), logits.device());
  const Tensor d = ce.grad, d_col_sums = ce.col_sums;
  // The parameter handles themselves (not detached) so that folded_sgd_lr() sees their state.
  record("LinearCrossEntropyBackward", {x, weight, bias}, {loss},
         [xd, wd, weight, bias, d, d_col_sums, n, gx, gw, gb](const std::vector<Tensor>& g) {
           const double s = g[0].item() / static_cast<double>(std::max<std::int64_t>(n, 1));
           std::vector<Tensor> out(3);
           if (gx) {  // dx = s D W (NN), before W changes
             out[0] = Tensor::empty(xd.sizes(), xd.dtype(), xd.device());
             ops::gemm(d, false, wd, false, out[0], s, 0.0);
           }
           if (gw) out[1] = decoder_weight_grad(d, xd, weight, s);  // s D^T x
           if (gb) out[2] = detail::linear_bias_grad(ops::mul_scalar(d_col_sums, s), bias);
           return out;
         });
  return loss;
}

}  // namespace anvil
