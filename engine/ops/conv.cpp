// SPDX-License-Identifier: Apache-2.0
// Tensor-level conv2d (engine/ops/conv.h): checks, allocation, dispatch per pass.
#include "engine/ops/conv.h"

#include "engine/core/views.h"
#include "engine/dispatch/trial_timer.h"
#include "engine/ops/elementwise.h"

namespace anvil::ops {
namespace {

std::string pair_str(const std::array<std::int64_t, 2>& a) {
  return detail::str_cat(a[0], 'x', a[1]);
}

void run(const ConvArgs& args) {
  // Every pass writes only its outputs, so an autotune trial may run on them directly.
  conv_table().run(args, [&](const ConvTable::Variant& v) {
    return time_trial(
        args.problem.device, [&] { v.fn(args); }, "conv2d autotune");
  });
}

}  // namespace

ConvProblem conv2d_problem(const Shape& x, const Shape& wt, bool has_bias, const Conv2dOptions& o,
                           DType dtype, const char* where) {
  ANVIL_CHECK(x.size() == 4, where, "expected 4-D input (N,C,H,W), got ", shape_str(x));
  ANVIL_CHECK(wt.size() == 4, where, "expected 4-D weight (K,C/groups,R,S), got ", shape_str(wt));
  ANVIL_CHECK(o.groups >= 1, where, "groups must be positive, got ", o.groups);
  ANVIL_CHECK(o.stride[0] >= 1 && o.stride[1] >= 1, where, "stride must be positive, got ",
              pair_str(o.stride));
  ANVIL_CHECK(o.dilation[0] >= 1 && o.dilation[1] >= 1, where, "dilation must be positive, got ",
              pair_str(o.dilation));
  ANVIL_CHECK(o.padding[0] >= 0 && o.padding[1] >= 0, where, "padding must be non-negative, got ",
              pair_str(o.padding));
  ANVIL_CHECK(wt[0] >= 1 && wt[1] >= 1 && wt[2] >= 1 && wt[3] >= 1, where,
              "weight sizes must be positive, got ", shape_str(wt));
  ANVIL_CHECK(x[0] >= 0 && x[1] >= 1 && x[2] >= 1 && x[3] >= 1, where,
              "input sizes must be positive (N may be 0), got ", shape_str(x));
  ANVIL_CHECK(x[1] == wt[1] * o.groups, where, "input ", shape_str(x), " has C=", x[1],
              " channels but weight ", shape_str(wt), " with groups=", o.groups, " expects ",
              wt[1] * o.groups, " (C/groups=", wt[1], ")");
  ANVIL_CHECK(wt[0] % o.groups == 0, where, "out channels K=", wt[0],
              " are not divisible by groups=", o.groups);
  ConvProblem p;
  p.dtype = dtype;
  p.n = x[0];
  p.c = x[1];
  p.h = x[2];
  p.w = x[3];
  p.k = wt[0];
  p.r = wt[2];
  p.s = wt[3];
  p.stride_h = o.stride[0];
  p.stride_w = o.stride[1];
  p.pad_h = o.padding[0];
  p.pad_w = o.padding[1];
  p.dil_h = o.dilation[0];
  p.dil_w = o.dilation[1];
  p.groups = o.groups;
  p.has_bias = has_bias;
  const std::int64_t ext_h = p.dil_h * (p.r - 1) + 1, ext_w = p.dil_w * (p.s - 1) + 1;
  ANVIL_CHECK(ext_h <= p.h + 2 * p.pad_h && ext_w <= p.w + 2 * p.pad_w, where, "kernel ", p.r, 'x',
              p.s, " (", ext_h, 'x', ext_w, " with dilation ", pair_str(o.dilation),
              ") is larger than the padded input ", p.h + 2 * p.pad_h, 'x', p.w + 2 * p.pad_w,
              " (input ", shape_str(x), ", padding ", pair_str(o.padding), ")");
  return p;
}

ConvProblem conv2d_problem(const Tensor& x, const Tensor& weight, const Tensor& bias,
                           const Conv2dOptions& params, const char* where) {
  check_defined(x, where, "input");
  check_defined(weight, where, "weight");
  // bf16/f16: the autocast path (Note [Autocast policy]); their variants accumulate in f32.
  ANVIL_CHECK(is_any_floating(x.dtype()), where,
              "expected a float32, float64, bfloat16 or float16 input, got ",
              dtype_name(x.dtype()));
  ANVIL_CHECK(weight.dtype() == x.dtype(), where, "dtype mismatch: input is ",
              dtype_name(x.dtype()), " but weight is ", dtype_name(weight.dtype()));
  check_same_device(x, weight, where);
  ConvProblem p =
      conv2d_problem(x.sizes(), weight.sizes(), bias.defined(), params, x.dtype(), where);
  if (bias.defined()) {
    ANVIL_CHECK(bias.dim() == 1 && bias.sizes()[0] == p.k, where, "expected bias [", p.k,
                "] for weight ", shape_str(weight.sizes()), ", got ", shape_str(bias.sizes()));
    ANVIL_CHECK(bias.dtype() == x.dtype(), where, "dtype mismatch: input is ",
                dtype_name(x.dtype()), " but bias is ", dtype_name(bias.dtype()));
    check_same_device(x, bias, where);
  }
  p.device = x.device();
  return p;
}

Tensor conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                      const Conv2dOptions& params, bool relu, bool* fused) {
  ConvProblem p = conv2d_problem(x, weight, bias, params);
  if (fused) *fused = false;
  Tensor y = Tensor::empty({p.n, p.k, p.p(), p.q()}, x.dtype(), x.device());
  if (p.n == 0) return y;
  const Tensor xc = raw::contiguous(x), wc = raw::contiguous(weight);
  const Tensor bc = bias.defined() ? raw::contiguous(bias) : Tensor();
  ConvArgs args;
  args.problem = p;
  args.x = xc.data_ptr();
  args.w = wc.data_ptr();
  args.b = bc.defined() ? bc.data_ptr() : nullptr;
  args.y = y.data_ptr();
  const auto trial = [&](const ConvTable::Variant& v) {
    return time_trial(
        p.device, [&] { v.fn(args); }, "conv2d autotune");
  };
  const ConvTable::Variant& v = conv_table().select(p, trial);
  if (relu) {
    ConvProblem pf = p;
    pf.fuse_relu = true;
    if (!v.supports || v.supports(pf).ok) {
      args.problem = pf;
      v.fn(args);
      if (fused) *fused = true;
      return y;
    }
  }
  v.fn(args);
  if (relu) unary_into(EwOp::relu, y, y);
  return y;
}

namespace {

// The problem of a backward pass on `like`'s dtype and device (the weight or the input), once
// dy is checked: on that device, of shape [N, K, P, Q] and of that dtype.
ConvProblem backward_problem(const Shape& x_shape, const Shape& weight_shape, bool with_bias,
                             const Conv2dOptions& params, const Tensor& like, const Tensor& dy,
                             ConvPass pass) {
  const char* where = "conv2d backward";
  ConvProblem p = conv2d_problem(x_shape, weight_shape, with_bias, params, like.dtype(), where);
  check_same_device(like, dy, where);  // the variants read dy on the problem's device
  p.device = like.device();
  p.pass = pass;
  ANVIL_CHECK(dy.sizes() == Shape({p.n, p.k, p.p(), p.q()}) && dy.dtype() == like.dtype(), where,
              "grad_output ", shape_str(dy.sizes()), ' ', dtype_name(dy.dtype()),
              " does not match [", p.n, ',', p.k, ',', p.p(), ',', p.q(), "] ",
              dtype_name(like.dtype()));
  return p;
}

}  // namespace

Tensor conv2d_backward_data(const Tensor& dy, const Tensor& weight, const Shape& x_shape,
                            const Conv2dOptions& params) {
  const ConvProblem p =
      backward_problem(x_shape, weight.sizes(), false, params, weight, dy, ConvPass::backward_data);
  Tensor dx = Tensor::empty(x_shape, weight.dtype(), weight.device());
  if (p.n == 0) return dx;
  const Tensor dyc = raw::contiguous(dy), wc = raw::contiguous(weight);
  ConvArgs args;
  args.problem = p;
  args.dy = dyc.data_ptr();
  args.w = wc.data_ptr();
  args.dx = dx.data_ptr();
  run(args);
  return dx;
}

std::pair<Tensor, Tensor> conv2d_backward_weights(const Tensor& x, const Tensor& dy,
                                                  const Shape& weight_shape, bool with_bias,
                                                  const Conv2dOptions& params) {
  const ConvProblem p = backward_problem(x.sizes(), weight_shape, with_bias, params, x, dy,
                                         ConvPass::backward_weights);
  Tensor dw = Tensor::empty(weight_shape, x.dtype(), x.device());
  Tensor db = with_bias ? Tensor::empty({p.k}, x.dtype(), x.device()) : Tensor();
  if (p.n == 0) {
    dw.zero_();
    if (db.defined()) db.zero_();
    return {dw, db};
  }
  const Tensor xc = raw::contiguous(x), dyc = raw::contiguous(dy);
  ConvArgs args;
  args.problem = p;
  args.x = xc.data_ptr();
  args.dy = dyc.data_ptr();
  args.dw = dw.data_ptr();
  args.db = db.defined() ? db.data_ptr() : nullptr;
  run(args);
  return {dw, db};
}

}  // namespace anvil::ops
