// SPDX-License-Identifier: Apache-2.0
// nn::BatchNorm2d (engine/nn/batch_norm.h).
#include "engine/nn/batch_norm.h"

#include "engine/dispatch/batch_norm_problem.h"

namespace anvil::nn {

BatchNorm2d::BatchNorm2d(std::int64_t channels, double eps, double momentum)
    : channels_(channels), eps_(eps), momentum_(momentum) {
  ANVIL_CHECK(channels > 0, "BatchNorm2d", "channels must be positive, got ", channels);
  ANVIL_CHECK(eps > 0.0, "BatchNorm2d", "eps must be positive, got ", eps);
  ANVIL_CHECK(momentum >= 0.0 && momentum <= 1.0, "BatchNorm2d", "momentum must be in [0, 1], got ",
              momentum);
  register_parameter("weight", Tensor::ones({channels}));
  register_parameter("bias", Tensor::zeros({channels}));
  register_buffer("running_mean", Tensor::zeros({channels}));
  register_buffer("running_var", Tensor::ones({channels}));
  // Pointers are taken after all registrations (the lists may reallocate before).
  weight_ = &parameter("weight");
  bias_ = &parameter("bias");
  running_mean_ = &buffer("running_mean");
  running_var_ = &buffer("running_var");
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  ANVIL_CHECK(x.dim() == 4 && x.sizes()[1] == channels_, "BatchNorm2d", "expected input [N,",
              channels_, ",H,W], got ", shape_str(x.sizes()));
  return batch_norm2d(x, *weight_, *bias_, *running_mean_, *running_var_, is_training(), momentum_,
                      eps_);
}

std::string BatchNorm2d::extra_repr() const {
  return detail::str_cat("channels=", channels_, ", eps=", eps_, ", momentum=", momentum_);
}

Shape BatchNorm2d::output_shape(const Shape& in) const {
  ANVIL_CHECK(in.size() == 4 && in[1] == channels_, "BatchNorm2d", "expected input [N,", channels_,
              ",H,W], got ", shape_str(in));
  return in;
}

double BatchNorm2d::forward_flops(const Shape& in) const {
  return 2.0 * static_cast<double>(shape_numel(in));
}

void BatchNorm2d::problems(const Shape& in, const std::string& prefix,
                           std::vector<NamedProblem>& out) const {
  (void)output_shape(in);
  BatchNormProblem p = make_batch_norm_problem(in, is_training(), momentum_, eps_, weight_->dtype(),
                                               weight_->device(), "BatchNorm2d");
  std::string name = prefix;
  if (!name.empty() && name.back() == '.') name.pop_back();
  out.push_back({std::move(name), p});
}

}  // namespace anvil::nn
