// SPDX-License-Identifier: Apache-2.0
// Convolution problem descriptor (engine/dispatch/conv_problem.h).
#include "engine/dispatch/conv_problem.h"

#include "engine/core/error.h"
#include "engine/dispatch/registration.h"

namespace anvil {

const char* conv_pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::forward:
      return "forward";
    case ConvPass::backward_data:
      return "backward_data";
    case ConvPass::backward_weights:
      return "backward_weights";
  }
  return "?";
}

std::int64_t ConvProblem::p() const {
  return stride_h > 0 ? (h + 2 * pad_h - dil_h * (r - 1) - 1) / stride_h + 1 : 0;
}
std::int64_t ConvProblem::q() const {
  return stride_w > 0 ? (w + 2 * pad_w - dil_w * (s - 1) - 1) / stride_w + 1 : 0;
}

bool ConvProblem::is_pointwise() const {
  return r == 1 && s == 1 && stride_h == 1 && stride_w == 1 && pad_h == 0 && pad_w == 0;
}

std::string ConvProblem::key() const {
  return detail::str_cat(conv_pass_name(pass), ' ', dtype_name(dtype), ' ', device.str(), ' ', n,
                         ' ', c, ' ', h, ' ', w, ' ', k, ' ', r, ' ', s, ' ', stride_h, ' ',
                         stride_w, ' ', pad_h, ' ', pad_w, ' ', dil_h, ' ', dil_w, ' ', groups, ' ',
                         has_bias, ' ', fuse_relu);
}

std::string ConvProblem::repr() const {
  return detail::str_cat("conv2d ", dtype_name(dtype), ' ', device.str(), ' ', conv_pass_name(pass),
                         " N=", n, " C=", c, " H=", h, " W=", w, " K=", k, " R=", r, " S=", s,
                         " stride=", stride_h, 'x', stride_w, " pad=", pad_h, 'x', pad_w,
                         " dil=", dil_h, 'x', dil_w, " groups=", groups, has_bias ? " bias" : "",
                         fuse_relu ? " relu" : "", " -> P=", p(), " Q=", q());
}

double ConvProblem::flops() const {
  const double out = static_cast<double>(n) * k * p() * q();
  const double macs = out * static_cast<double>(c_per_group()) * r * s;
  const bool bias_work = has_bias && pass != ConvPass::backward_data;
  return 2.0 * macs + (bias_work ? out : 0.0);
}

double ConvProblem::bytes() const {
  const double e = static_cast<double>(dtype_size(dtype));
  const double xs = static_cast<double>(n) * c * h * w;
  const double ws = static_cast<double>(k) * c_per_group() * r * s;
  const double ys = static_cast<double>(n) * k * p() * q();
  const double bs = has_bias && pass != ConvPass::backward_data ? static_cast<double>(k) : 0.0;
  return e * (xs + ws + ys + bs);
}

void ConvProblem::validate(const char* where) const {
  ANVIL_CHECK(n >= 1 && c >= 1 && h >= 1 && w >= 1 && k >= 1 && r >= 1 && s >= 1, where,
              "sizes must be positive in ", repr());
  ANVIL_CHECK(stride_h >= 1 && stride_w >= 1, where, "stride must be positive, got ", stride_h, 'x',
              stride_w);
  ANVIL_CHECK(dil_h >= 1 && dil_w >= 1, where, "dilation must be positive, got ", dil_h, 'x',
              dil_w);
  ANVIL_CHECK(pad_h >= 0 && pad_w >= 0, where, "padding must be non-negative, got ", pad_h, 'x',
              pad_w);
  ANVIL_CHECK(groups >= 1 && c % groups == 0 && k % groups == 0, where, "groups=", groups,
              " must divide C=", c, " and K=", k);
  ANVIL_CHECK(p() >= 1 && q() >= 1, where, "the dilated filter (", dil_h * (r - 1) + 1, 'x',
              dil_w * (s - 1) + 1, ") is larger than the padded input (", h + 2 * pad_h, 'x',
              w + 2 * pad_w, ") in ", repr());
}

ConvTable& conv_table() {
  static ConvTable table("conv2d");
  register_builtin_kernels();  // fills the table on first use
  return table;
}

}  // namespace anvil
