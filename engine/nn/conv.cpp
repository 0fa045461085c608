// SPDX-License-Identifier: Apache-2.0
// nn::Conv2d (engine/nn/conv.h).
#include "engine/nn/conv.h"

#include <cmath>

#include "engine/nn/init.h"
#include "engine/ops/conv.h"

namespace anvil::nn {

Conv2d::Conv2d(std::int64_t in, std::int64_t out, std::array<std::int64_t, 2> kernel,
               Conv2dOptions options, bool bias, Generator* gen)
    : in_(in), out_(out), kernel_(kernel), options_(options) {
  ANVIL_CHECK(in > 0 && out > 0 && kernel[0] > 0 && kernel[1] > 0, "Conv2d",
              "channels and kernel must be positive, got in=", in, ", out=", out,
              ", kernel=", kernel[0], 'x', kernel[1]);
  ANVIL_CHECK(options.groups >= 1 && in % options.groups == 0 && out % options.groups == 0,
              "Conv2d", "groups=", options.groups, " must divide in=", in, " and out=", out);
  const std::int64_t fan_in = in / options.groups * kernel[0] * kernel[1];
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  register_parameter("weight", uniform({out, in / options.groups, kernel[0], kernel[1]}, -bound,
                                       bound, DType::f32, gen));
  if (bias) register_parameter("bias", uniform({out}, -bound, bound, DType::f32, gen));
  weight_ = &parameter("weight");
  bias_ = bias ? &parameter("bias") : &no_bias_;
}

Tensor Conv2d::forward(const Tensor& x) {
  return fused_relu_ ? conv2d_relu(x, *weight_, *bias_, options_)
                     : conv2d(x, *weight_, *bias_, options_);
}

std::string Conv2d::extra_repr() const {
  const auto& o = options_;
  std::string s = detail::str_cat("in=", in_, ", out=", out_, ", kernel=", kernel_[0], 'x',
                                  kernel_[1], ", stride=", o.stride[0], 'x', o.stride[1],
                                  ", padding=", o.padding[0], 'x', o.padding[1]);
  if (o.dilation[0] != 1 || o.dilation[1] != 1)
    s += detail::str_cat(", dilation=", o.dilation[0], 'x', o.dilation[1]);
  if (o.groups != 1) s += detail::str_cat(", groups=", o.groups);
  s += bias_->defined() ? ", bias=true" : ", bias=false";
  if (fused_relu_) s += ", fused_relu=true";
  return s;
}

Shape Conv2d::output_shape(const Shape& in) const {
  const ConvProblem p =
      ops::conv2d_problem(in, weight_->sizes(), bias_->defined(), options_, DType::f32, "Conv2d");
  return {p.n, p.k, p.p(), p.q()};
}

double Conv2d::forward_flops(const Shape& in) const {
  ConvProblem p =
      ops::conv2d_problem(in, weight_->sizes(), bias_->defined(), options_, DType::f32, "Conv2d");
  return p.flops();
}

void Conv2d::problems(const Shape& in, const std::string& prefix,
                      std::vector<NamedProblem>& out) const {
  ConvProblem p = ops::conv2d_problem(in, weight_->sizes(), bias_->defined(), options_,
                                      weight_->dtype(), "Conv2d");
  p.device = weight_->device();
  p.fuse_relu = fused_relu_;
  std::string name = prefix;
  if (!name.empty() && name.back() == '.') name.pop_back();
  out.push_back({std::move(name), p});
}

}  // namespace anvil::nn
