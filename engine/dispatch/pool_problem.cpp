// SPDX-License-Identifier: Apache-2.0
// Pooling problem descriptor (engine/dispatch/pool_problem.h).
//
// Note [Pool output size]
// As PyTorch: OH = (H + 2*PH - KH) / SH + 1, the division rounded down, or up with ceil_mode;
// with ceil_mode the last window must still start inside the input or the top padding, so when
// (OH - 1) * SH >= H + PH the last row is dropped. Hence every window holds at least one input
// element (PH <= KH / 2 is required), and a ceil_mode window may reach past the bottom padding;
// average pooling with count_include_pad then divides by the part of the window that lies in
// input + padding (min(start + KH, H + PH) - start), not by KH (PyTorch's divisor).
#include "engine/dispatch/pool_problem.h"

#include "engine/core/error.h"
#include "engine/dispatch/registration.h"

namespace anvil {

const char* pool_op_name(PoolKind kind) {
  switch (kind) {
    case PoolKind::max:
      return "max_pool2d";
    case PoolKind::avg:
      return "avg_pool2d";
    case PoolKind::adaptive_avg:
      return "adaptive_avg_pool2d";
  }
  return "?";
}

const char* pool_pass_name(PoolPass pass) {
  switch (pass) {
    case PoolPass::forward_inference:
      return "forward_inference";
    case PoolPass::forward_training:
      return "forward_training";
    case PoolPass::backward:
      return "backward";
  }
  return "?";
}

std::string PoolProblem::key() const {
  return detail::str_cat(pool_op_name(kind), ' ', pool_pass_name(pass), ' ', dtype_name(dtype), ' ',
                         device.str(), ' ', n, ' ', c, ' ', h, ' ', w, ' ', kh, ' ', kw, ' ', sh,
                         ' ', sw, ' ', ph, ' ', pw, ' ', ceil_mode, ' ', count_include_pad, ' ', oh,
                         ' ', ow);
}

std::string PoolProblem::repr() const {
  std::string s =
      detail::str_cat(pool_op_name(kind), ' ', pool_pass_name(pass), ' ', dtype_name(dtype), ' ',
                      device.str(), " N=", n, " C=", c, " H=", h, " W=", w);
  if (kind != PoolKind::adaptive_avg) {
    s += detail::str_cat(" k=", kh, 'x', kw, " s=", sh, 'x', sw, " p=", ph, 'x', pw);
    if (ceil_mode) s += " ceil_mode";
    if (kind == PoolKind::avg) s += count_include_pad ? " include_pad" : " exclude_pad";
  }
  return s + detail::str_cat(" -> OH=", oh, " OW=", ow);
}

double PoolProblem::flops() const {
  double window = 0.0;
  if (kind == PoolKind::adaptive_avg) {
    double bh = 0, bw = 0;  // summed bin heights / widths
    for (std::int64_t i = 0; i < oh; ++i)
      bh += double(adaptive_end(i, h, oh) - adaptive_start(i, h, oh));
    for (std::int64_t j = 0; j < ow; ++j)
      bw += double(adaptive_end(j, w, ow) - adaptive_start(j, w, ow));
    return static_cast<double>(planes()) * bh * bw;
  }
  window = static_cast<double>(kh) * static_cast<double>(kw);
  return static_cast<double>(out_numel()) * window;
}

double PoolProblem::bytes() const {
  const double e = static_cast<double>(dtype_size(dtype));
  const double ws = (kind == PoolKind::max && pass != PoolPass::forward_inference) ? 4.0 : 0.0;
  return e * static_cast<double>(in_numel() + out_numel()) + ws * static_cast<double>(out_numel());
}

std::int64_t pool_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                              std::int64_t pad, bool ceil_mode) {
  const std::int64_t span = in + 2 * pad - kernel;  // >= 0 (checked by the callers)
  std::int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;  // Note [Pool output size]
  return out;
}

namespace {

// The problem's input part (kind, dtype, device, N C H W), once the input is checked.
PoolProblem input_problem(PoolKind kind, const Shape& x, DType dtype, Device device,
                          const char* where) {
  ANVIL_CHECK(x.size() == 4, where, "expected 4-D input (N,C,H,W), got ", shape_str(x));
  ANVIL_CHECK(is_any_floating(dtype), where,
              "needs a floating-point input (f32, f64, bf16 or f16), got ", dtype_name(dtype));
  ANVIL_CHECK(x[1] > 0 && x[2] > 0 && x[3] > 0, where,
              "expected an input with non-empty C, H and W, got ", shape_str(x));
  PoolProblem p;
  p.kind = kind;
  p.dtype = dtype;
  p.device = device;
  p.n = x[0];
  p.c = x[1];
  p.h = x[2];
  p.w = x[3];
  return p;
}

}  // namespace

PoolProblem make_pool_problem(PoolKind kind, const Shape& x, std::array<std::int64_t, 2> kernel,
                              std::array<std::int64_t, 2> stride,
                              std::array<std::int64_t, 2> padding, bool ceil_mode,
                              bool count_include_pad, DType dtype, Device device,
                              const char* where) {
  ANVIL_CHECK(kind != PoolKind::adaptive_avg, where, "use make_adaptive_pool_problem");
  PoolProblem p = input_problem(kind, x, dtype, device, where);
  if (stride[0] == 0 && stride[1] == 0) stride = kernel;  // PyTorch: stride defaults to kernel
  ANVIL_CHECK(kernel[0] > 0 && kernel[1] > 0, where, "kernel must be positive, got [", kernel[0],
              ",", kernel[1], "]");
  ANVIL_CHECK(stride[0] > 0 && stride[1] > 0, where, "stride must be positive, got [", stride[0],
              ",", stride[1], "]");
  ANVIL_CHECK(padding[0] >= 0 && padding[1] >= 0, where, "padding must be non-negative, got [",
              padding[0], ",", padding[1], "]");
  ANVIL_CHECK(2 * padding[0] <= kernel[0] && 2 * padding[1] <= kernel[1], where, "padding [",
              padding[0], ",", padding[1], "] must be at most half the kernel [", kernel[0], ",",
              kernel[1], "]");
  ANVIL_CHECK(kernel[0] <= x[2] + 2 * padding[0] && kernel[1] <= x[3] + 2 * padding[1], where,
              "kernel [", kernel[0], ",", kernel[1], "] is larger than the padded input ",
              x[2] + 2 * padding[0], "x", x[3] + 2 * padding[1], " (input ", shape_str(x),
              ", padding [", padding[0], ",", padding[1], "])");
  p.kh = kernel[0];
  p.kw = kernel[1];
  p.sh = stride[0];
  p.sw = stride[1];
  p.ph = padding[0];
  p.pw = padding[1];
  p.ceil_mode = ceil_mode;
  p.count_include_pad = kind == PoolKind::avg ? count_include_pad : true;
  p.oh = pool_output_size(p.h, p.kh, p.sh, p.ph, ceil_mode);
  p.ow = pool_output_size(p.w, p.kw, p.sw, p.pw, ceil_mode);
  return p;
}

PoolProblem make_adaptive_pool_problem(const Shape& x, std::array<std::int64_t, 2> output_size,
                                       DType dtype, Device device, const char* where) {
  PoolProblem p = input_problem(PoolKind::adaptive_avg, x, dtype, device, where);
  ANVIL_CHECK(output_size[0] > 0 && output_size[1] > 0, where,
              "output size must be positive, got [", output_size[0], ",", output_size[1], "]");
  p.oh = output_size[0];
  p.ow = output_size[1];
  return p;
}

PoolTable& max_pool2d_table() {
  static PoolTable table("max_pool2d");
  register_builtin_kernels();  // fills the table on first use
  return table;
}
PoolTable& avg_pool2d_table() {
  static PoolTable table("avg_pool2d");
  register_builtin_kernels();  // fills the table on first use
  return table;
}
PoolTable& adaptive_avg_pool2d_table() {
  static PoolTable table("adaptive_avg_pool2d");
  register_builtin_kernels();  // fills the table on first use
  return table;
}
PoolTable& pool_table(PoolKind kind) {
  switch (kind) {
    case PoolKind::max:
      return max_pool2d_table();
    case PoolKind::avg:
      return avg_pool2d_table();
    case PoolKind::adaptive_avg:
      return adaptive_avg_pool2d_table();
  }
  return max_pool2d_table();
}

}  // namespace anvil
