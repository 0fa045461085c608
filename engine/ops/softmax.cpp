// SPDX-License-Identifier: Apache-2.0
// Softmax family (engine/ops/softmax.h): checks, dense buffers, then one call of the `softmax`
// table (engine/dispatch/softmax_problem.h) on the input's device.
#include "engine/ops/softmax.h"

#include "engine/core/views.h"
#include "engine/dispatch/softmax_problem.h"
#include "engine/dispatch/trial_timer.h"

namespace anvil::ops {
namespace {
void check_float(const Tensor& x, const char* where) {
  check_defined(x, where, "input");
  ANVIL_CHECK(is_floating(x.dtype()), where, "needs a floating-point tensor, got ",
              dtype_name(x.dtype()));
  ANVIL_CHECK(x.dim() >= 1, where, "needs at least 1 dimension, got a scalar");
}
std::int64_t cols_of(const Tensor& x) { return x.dim() ? x.sizes().back() : 1; }

SoftmaxArgs make_args(SoftmaxOp op, const Tensor& x, std::int64_t rows, std::int64_t cols) {
  SoftmaxArgs args;
  args.problem.op = op;
  args.problem.dtype = x.dtype();
  args.problem.device = x.device();
  args.problem.rows = rows;
  args.problem.cols = cols;
  args.x = x.data_ptr();
  return args;
}

void run(const SoftmaxArgs& args) {
  if (args.problem.rows == 0) return;  // nothing to compute (and possibly no buffers)
  // An autotune trial runs on the call's own outputs, which every form but the fused
  // cross-entropy forward+gradient writes without reading (that one may overwrite its logits in
  // place and sums into col_sums): it selects without trials.
  if (args.grad != nullptr) return softmax_table().run(args);
  softmax_table().run(args, [&args](const SoftmaxTable::Variant& v) {
    return time_trial(
        args.problem.device, [&] { v.fn(args); }, "softmax autotune");
  });
}
}  // namespace

static Tensor softmax_impl(const Tensor& x_in, bool log, const char* where) {
  check_float(x_in, where);
  Tensor x = raw::contiguous(x_in);
  Tensor y = Tensor::empty(x.sizes(), x.dtype(), x.device());
  const std::int64_t cols = cols_of(x), rows = cols ? x.numel() / cols : 0;
  SoftmaxArgs args = make_args(log ? SoftmaxOp::log_softmax : SoftmaxOp::softmax, x, rows, cols);
  args.out = y.data_ptr();
  run(args);
  return y;
}

Tensor softmax(const Tensor& x) { return softmax_impl(x, false, "softmax"); }
Tensor log_softmax(const Tensor& x) { return softmax_impl(x, true, "log_softmax"); }

Tensor softmax_backward(const Tensor& y_in, const Tensor& dy_in, bool log) {
  check_float(y_in, "softmax_backward");
  check_defined(dy_in, "softmax_backward", "dy");
  ANVIL_CHECK(dy_in.sizes() == y_in.sizes() && dy_in.dtype() == y_in.dtype(), "softmax_backward",
              "dy ", shape_str(dy_in.sizes()), ' ', dtype_name(dy_in.dtype()), " does not match y ",
              shape_str(y_in.sizes()), ' ', dtype_name(y_in.dtype()));
  check_same_device(y_in, dy_in, "softmax_backward");
  Tensor y = raw::contiguous(y_in), dy = raw::contiguous(dy_in);
  Tensor dx = Tensor::empty(y.sizes(), y.dtype(), y.device());
  const std::int64_t cols = cols_of(y), rows = cols ? y.numel() / cols : 0;
  SoftmaxArgs args =
      make_args(log ? SoftmaxOp::log_softmax_backward : SoftmaxOp::softmax_backward, y, rows, cols);
  args.dy = dy.data_ptr();
  args.out = dx.data_ptr();
  run(args);
  return dx;
}

namespace {
void check_ce(const Tensor& logits, const Tensor& target) {
  check_float(logits, "cross_entropy");
  check_defined(target, "cross_entropy", "target");
  ANVIL_CHECK(logits.dim() == 2, "cross_entropy", "expected logits [N, C], got ",
              shape_str(logits.sizes()));
  ANVIL_CHECK(target.dtype() == DType::i64 || target.dtype() == DType::i32, "cross_entropy",
              "expected class indices of dtype i64 or i32, got ", dtype_name(target.dtype()));
  ANVIL_CHECK(target.dim() == 1 && target.sizes()[0] == logits.sizes()[0], "cross_entropy",
              "expected target [", logits.sizes()[0], "] for logits ", shape_str(logits.sizes()),
              ", got ", shape_str(target.sizes()));
  check_same_device(logits, target, "cross_entropy");
}
}  // namespace

std::pair<Tensor, Tensor> cross_entropy_forward(const Tensor& logits_in, const Tensor& target_in) {
  check_ce(logits_in, target_in);
  Tensor x = raw::contiguous(logits_in), t = raw::contiguous(target_in);
  const std::int64_t rows = x.sizes()[0], cols = x.sizes()[1];
  Tensor loss = Tensor::empty({rows}, x.dtype(), x.device());
  Tensor lse = Tensor::empty({rows}, x.dtype(), x.device());
  SoftmaxArgs args = make_args(SoftmaxOp::cross_entropy_forward, x, rows, cols);
  args.problem.index_dtype = t.dtype();
  args.target = t.data_ptr();
  args.out = loss.data_ptr();
  args.lse = lse.data_ptr();
  run(args);
  return {loss, lse};
}

Tensor cross_entropy_backward(const Tensor& logits_in, const Tensor& target_in,
                              const Tensor& lse_in, double scale, const Tensor& scale_by) {
  check_ce(logits_in, target_in);
  check_defined(lse_in, "cross_entropy_backward", "lse");
  ANVIL_CHECK(lse_in.dtype() == logits_in.dtype() && lse_in.numel() == logits_in.sizes()[0],
              "cross_entropy_backward", "lse ", shape_str(lse_in.sizes()), ' ',
              dtype_name(lse_in.dtype()), " does not match logits ", shape_str(logits_in.sizes()),
              ' ', dtype_name(logits_in.dtype()));
  check_same_device(logits_in, lse_in, "cross_entropy_backward");
  Tensor x = raw::contiguous(logits_in), t = raw::contiguous(target_in);
  Tensor lse = raw::contiguous(lse_in);
  const std::int64_t rows = x.sizes()[0], cols = x.sizes()[1];
  Tensor dx = Tensor::empty(x.sizes(), x.dtype(), x.device());
  SoftmaxArgs args = make_args(SoftmaxOp::cross_entropy_backward, x, rows, cols);
  args.problem.index_dtype = t.dtype();
  args.target = t.data_ptr();
  args.lse = lse.data_ptr();
  args.out = dx.data_ptr();
  args.scale = scale;
  Tensor factor;  // keeps a converted scale_by alive during the call
  if (scale_by.defined()) {
    ANVIL_CHECK(scale_by.numel() == 1, "cross_entropy_backward",
                "scale_by must hold one value, got ", shape_str(scale_by.sizes()));
    if (scale_by.device().is_cpu() || !x.device().is_cuda()) {
      args.scale = scale * scale_by.item();
    } else {
      // Read on the device by the kernel (Note [Host waits in a step]).
      check_same_device(x, scale_by, "cross_entropy_backward");
      factor = scale_by.dtype() == x.dtype() ? raw::contiguous(scale_by) : scale_by.to(x.dtype());
      args.scale_device = factor.data_ptr();
    }
  }
  run(args);
  return dx;
}

CrossEntropyWithGrad cross_entropy_forward_grad(const Tensor& logits_in, const Tensor& target_in,
                                                bool in_place, bool col_sums) {
  check_ce(logits_in, target_in);
  ANVIL_CHECK(!in_place || logits_in.is_contiguous(), "cross_entropy_forward_grad",
              "in_place needs dense logits, got sizes ", shape_str(logits_in.sizes()), " strides ",
              shape_str(logits_in.strides()));
  Tensor x = raw::contiguous(logits_in), t = raw::contiguous(target_in);
  const std::int64_t rows = x.sizes()[0], cols = x.sizes()[1];
  CrossEntropyWithGrad r;
  r.losses = Tensor::empty({rows}, x.dtype(), x.device());
  r.lse = Tensor::empty({rows}, x.dtype(), x.device());
  r.grad = in_place ? x : Tensor::empty(x.sizes(), x.dtype(), x.device());
  if (col_sums) r.col_sums = Tensor::zeros({cols}, x.dtype(), x.device());  // stays 0 if rows == 0
  SoftmaxArgs args = make_args(SoftmaxOp::cross_entropy_forward_grad, x, rows, cols);
  args.problem.index_dtype = t.dtype();
  args.target = t.data_ptr();
  args.out = r.losses.data_ptr();
  args.lse = r.lse.data_ptr();
  args.grad = r.grad.data_ptr();
  args.col_sums = col_sums ? r.col_sums.data_ptr() : nullptr;
  run(args);
  return r;
}

}  // namespace anvil::ops
