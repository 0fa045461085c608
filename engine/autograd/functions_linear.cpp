// SPDX-License-Identifier: Apache-2.0
// matmul and linear with their backward GEMMs.
//
// Note [Linear layout]
// weight is [out, in] as in PyTorch, so y = x @ W^T is an NT GEMM, dx = dy @ W is NN and
// dW = dy^T @ x is TN; the bias is written into y first and the GEMM adds onto it (beta = 1),
// which saves a pass over y (or, for wide outputs from a narrow input, it rides in the GEMM:
// Note [Bias folded into the GEMM]). Which kernel runs each GEMM is the gemm table's choice per
// (shape, mode) (Note [Variant selection]).
#include "engine/autograd/autocast.h"
#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/linear_grads.h"
#include "engine/core/views.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/gemm.h"
#include "engine/ops/reduce.h"

namespace anvil {
namespace {
using Grads = std::vector<Tensor>;

// Note [Bias folded into the GEMM]
// y = x W^T + b can also be ONE GEMM over a depth of in + 1: [x | 1] @ [W | b]^T, beta = 0.
// Note [Linear layout]'s way writes b into every row of y first, a whole extra pass over y;
// the fold instead copies x and W once into the augmented operands. For the language models'
// decoder (y [4096, 10000] from in = 256) the bias pass writes 164 MB, 12 ms at 1 thread on the
// dev VM, against 14 MB of copies; the GEMM at K = 257 runs as fast as at K = 256 there
// (sgemm 197-199 ms vs 193-201 ms with beta = 1). So the fold is taken on the CPU when the
// copies are at most a quarter of y. In the registry's models that is the LSTM/PTB decoders
// only: the FCN and CNN classifiers have a large `in` and a batch-sized row count.
// lstm32 inference step, 1 thread, median of 24 steps interleaved with the library before:
// 0.295 -> 0.280 s. The same trick in the backward ([dW | db] = dy^T @ [x | 1], the bias
// gradient as the GEMM's last column instead of a column-sum pass over dy) did not pay: sgemm's
// TN GEMM at N = 257 lost what the saved pass gained (2 threads: 101 -> 111-114 ms vs ~11 ms).
bool fold_bias_into_gemm(const Tensor& x, std::int64_t rows, std::int64_t in_f,
                         std::int64_t out_f) {
  return x.device().is_cpu() && (rows + out_f) * (in_f + 1) * 4 <= rows * out_f;
}

// y = [x | 1] @ [weight | bias]^T (Note [Bias folded into the GEMM]); y is [rows, out].
void linear_folded_bias(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const Tensor& y) {
  const std::int64_t rows = x.sizes()[0], in_f = x.sizes()[1], out_f = weight.sizes()[0];
  Tensor xa = Tensor::empty({rows, in_f + 1}, x.dtype(), x.device());
  raw::slice(xa, 1, 0, in_f, 1).copy_(x);
  raw::slice(xa, 1, in_f, in_f + 1, 1).fill_(1.0);
  Tensor wa = Tensor::empty({out_f, in_f + 1}, x.dtype(), x.device());
  raw::slice(wa, 1, 0, in_f, 1).copy_(weight);
  raw::slice(wa, 1, in_f, in_f + 1, 1).copy_(raw::unsqueeze(bias, 1));
  ops::gemm(xa, false, wa, true, y, 1.0, 0.0);
}

}  // namespace

Tensor detail::linear_weight_grad(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                  double alpha) {
  const Tensor wd = weight.detach();
  if (const double lr = folded_sgd_lr(weight); lr > 0) {
    ops::gemm(dy, true, x, false, wd, -lr * alpha, 1.0);  // W -= lr alpha dy^T x
    return Tensor();
  }
  Tensor dw = Tensor::empty(wd.sizes(), wd.dtype(), wd.device());
  ops::gemm(dy, true, x, false, dw, alpha, 0.0);  // dW = alpha dy^T x (TN)
  return dw;
}

Tensor detail::linear_bias_grad(Tensor db, const Tensor& bias) {
  if (const double lr = folded_sgd_lr(bias); lr > 0) {
    ops::add_(bias.detach(), db, -lr);
    return Tensor();
  }
  return db;
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  check_defined(a_in, "matmul", "a");
  check_defined(b_in, "matmul", "b");
  // On the low-precision list (Note [Autocast policy]).
  const Tensor a = autocast_input("matmul", a_in), b = autocast_input("matmul", b_in);
  if (a.dim() > 2 && b.dim() == 2) {  // [..., K] @ [K, N]: flatten the leading dims
    Shape out_shape(a.sizes().begin(), a.sizes().end() - 1);
    out_shape.push_back(b.sizes()[1]);
    return matmul(a.reshape({-1, a.sizes().back()}), b).reshape(out_shape);
  }
  ANVIL_CHECK((a.dim() == 2 && b.dim() == 2) || (a.dim() == 3 && b.dim() == 3), "matmul",
              "supports 2-D @ 2-D, 3-D @ 3-D and N-D @ 2-D, got ", shape_str(a.sizes()), " @ ",
              shape_str(b.sizes()));
  Tensor out = ops::mm(a, false, b, false);
  if (any_requires_grad({&a, &b})) {
    const Tensor ad = a.detach(), bd = b.detach();
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    record("MatmulBackward", {a, b}, {out}, [ad, bd, ga, gb](const Grads& g) {
      return Grads{ga ? ops::mm(g[0], false, bd, true) : Tensor(),   // dA = dC @ B^T
                   gb ? ops::mm(ad, true, g[0], false) : Tensor()};  // dB = A^T @ dC
    });
  }
  return out;
}

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  check_defined(x_in, "linear", "input");
  check_defined(weight_in, "linear", "weight");
  // On the low-precision list (Note [Autocast policy]): an f32 weight is cast per call, so the
  // master weight stays f32 and its gradient comes back through the cast in f32.
  const Tensor x = autocast_input("linear", x_in), weight = autocast_input("linear", weight_in);
  const Tensor bias = autocast_input("linear", bias_in);
  ANVIL_CHECK(weight.dim() == 2, "linear", "expected weight [out, in], got ",
              shape_str(weight.sizes()));
  ANVIL_CHECK(x.dim() >= 1 && x.sizes().back() == weight.sizes()[1], "linear", "input ",
              shape_str(x.sizes()), " has ", x.dim() ? x.sizes().back() : 0,
              " features but weight ", shape_str(weight.sizes()), " expects ", weight.sizes()[1]);
  ANVIL_CHECK(weight.dtype() == x.dtype(), "linear", "dtype mismatch: input is ",
              dtype_name(x.dtype()), " but weight is ", dtype_name(weight.dtype()));
  if (bias.defined()) {
    ANVIL_CHECK(bias.dim() == 1 && bias.sizes()[0] == weight.sizes()[0], "linear", "bias ",
                shape_str(bias.sizes()), " does not match weight ", shape_str(weight.sizes()));
    // Checked here because the bias is copied into y (copy_ converts dtypes silently).
    ANVIL_CHECK(bias.dtype() == x.dtype(), "linear", "dtype mismatch: input is ",
                dtype_name(x.dtype()), " but bias is ", dtype_name(bias.dtype()));
  }
  if (x.dim() != 2) {  // [..., in] -> [rows, in] -> [..., out]
    Shape out_shape(x.sizes().begin(), x.sizes().end() - 1);
    out_shape.push_back(weight.sizes()[0]);
    return linear(x.reshape({-1, x.sizes().back()}), weight, bias).reshape(out_shape);
  }
  const std::int64_t rows = x.sizes()[0], out_f = weight.sizes()[0];
  const std::int64_t in_f = weight.sizes()[1];
  Tensor y = Tensor::empty({rows, out_f}, x.dtype(), x.device());
  if (bias.defined() && fold_bias_into_gemm(x, rows, in_f, out_f)) {
    linear_folded_bias(x, weight, bias, y);
  } else {
    double beta = 0.0;
    if (bias.defined()) {
      y.copy_(raw::expand(bias, y.sizes()));
      beta = 1.0;
    }
    ops::gemm(x, false, weight, true, y, 1.0, beta);  // y (+)= x @ W^T
  }
  if (any_requires_grad({&x, &weight, &bias})) {
    const Tensor xd = x.detach(), wd = weight.detach();
    const bool gx = x.requires_grad(), gw = weight.requires_grad();
    const bool gb = bias.defined() && bias.requires_grad();
    // The handles themselves (not detached) so that folded_sgd_lr() sees their autograd state.
    record("LinearBackward", {x, weight, bias}, {y},
           [xd, wd, weight, bias, gx, gw, gb](const Grads& g) {
             const Tensor& dy = g[0];
             Grads out(3);
             if (gx) out[0] = ops::mm(dy, false, wd, false);  // dx = dy @ W (NN), before W changes
             if (gw) out[1] = detail::linear_weight_grad(dy, xd, weight, 1.0);
             if (gb)
               out[2] = detail::linear_bias_grad(ops::sum(dy, {0}), bias);  // db = sum_rows dy
             return out;
           });
  }
  return y;
}

}  // namespace anvil
