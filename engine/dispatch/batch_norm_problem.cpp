// SPDX-License-Identifier: Apache-2.0
// Batch-norm problem descriptor (engine/dispatch/batch_norm_problem.h).
#include "engine/dispatch/batch_norm_problem.h"

#include <cstdio>

#include "engine/core/error.h"
#include "engine/dispatch/registration.h"

namespace anvil {
namespace {
std::string exact(double v) {  // hex float: two eps values differing in the last bit differ
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}
}  // namespace

const char* batch_norm_pass_name(BatchNormPass pass) {
  switch (pass) {
    case BatchNormPass::forward_training:
      return "forward_training";
    case BatchNormPass::forward_inference:
      return "forward_inference";
    case BatchNormPass::backward:
      return "backward";
  }
  return "?";
}

std::string BatchNormProblem::key() const {
  return detail::str_cat("batch_norm2d ", batch_norm_pass_name(pass), ' ', batch_stats, ' ',
                         dtype_name(dtype), ' ', device.str(), ' ', n, ' ', c, ' ', h, ' ', w, ' ',
                         exact(eps));
}

std::string BatchNormProblem::repr() const {
  return detail::str_cat(
      "batch_norm2d ", batch_norm_pass_name(pass),
      pass == BatchNormPass::backward ? (batch_stats ? " (batch stats)" : " (running stats)") : "",
      ' ', dtype_name(dtype), ' ', device.str(), " N=", n, " C=", c, " H=", h, " W=", w,
      " eps=", eps, " momentum=", momentum);
}

// Per element: training forward = sum, square-sum, scale+shift (~5); inference = one FMA (2);
// backward = two reductions + one affine combination (~8).
double BatchNormProblem::flops() const {
  const double per = pass == BatchNormPass::forward_training    ? 5.0
                     : pass == BatchNormPass::forward_inference ? 2.0
                                                                : 8.0;
  return per * static_cast<double>(numel());
}

double BatchNormProblem::bytes() const {
  const double e = static_cast<double>(dtype_size(dtype)) * static_cast<double>(numel());
  return pass == BatchNormPass::backward ? 3.0 * e : 2.0 * e;  // (x,dy,dx) or (x,y)
}

BatchNormProblem make_batch_norm_problem(const Shape& x, bool training, double momentum, double eps,
                                         DType dtype, Device device, const char* where) {
  ANVIL_CHECK(x.size() == 4, where, "expected 4-D input (N,C,H,W), got ", shape_str(x));
  ANVIL_CHECK(is_floating(dtype), where, "needs a floating-point input (f32 or f64), got ",
              dtype_name(dtype));
  ANVIL_CHECK(x[1] > 0, where, "expected at least one channel, got ", shape_str(x));
  ANVIL_CHECK(eps > 0.0, where, "eps must be positive, got ", eps);
  ANVIL_CHECK(momentum >= 0.0 && momentum <= 1.0, where, "momentum must be in [0, 1], got ",
              momentum);
  if (training)
    ANVIL_CHECK(x[0] * x[2] * x[3] > 1, where,
                "expected more than 1 value per channel when training, got input ", shape_str(x));
  BatchNormProblem p;
  p.pass = training ? BatchNormPass::forward_training : BatchNormPass::forward_inference;
  p.batch_stats = training;
  p.dtype = dtype;
  p.device = device;
  p.n = x[0];
  p.c = x[1];
  p.h = x[2];
  p.w = x[3];
  p.momentum = momentum;
  p.eps = eps;
  return p;
}

BatchNormTable& batch_norm2d_table() {
  static BatchNormTable table("batch_norm2d");
  register_builtin_kernels();  // fills the table on first use
  return table;
}

}  // namespace anvil
