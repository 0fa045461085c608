// SPDX-License-Identifier: Apache-2.0
#pragma once
// nn::Conv2d: a 2-D convolution layer (NCHW), optionally with a fused relu.
#include <array>
#include <cstdint>

#include "engine/autograd/functions.h"
#include "engine/core/random.h"
#include "engine/nn/module.h"

namespace anvil::nn {

// y = conv2d(x, W, b) with W [out, in/groups, R, S] (PyTorch layout). Default init as PyTorch:
// W, b ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in/groups * R * S.
// With set_fused_relu(true), forward returns conv2d_relu(...) (one kernel where the selected
// variant fuses the relu, Note [Fused conv relu]).
class Conv2d final : public Module {
 public:
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::array<std::int64_t, 2> kernel,
         Conv2dOptions options = {}, bool bias = true, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;
  Shape output_shape(const Shape& in) const override;
  double forward_flops(const Shape& in) const override;
  // One problem, op "conv2d": the forward ConvProblem at input `in`, named `prefix` without its
  // trailing '.' ("resnet50:layer3.0.conv2." -> "resnet50:layer3.0.conv2").
  void problems(const Shape& in, const std::string& prefix,
                std::vector<NamedProblem>& out) const override;

  void set_fused_relu(bool on) { fused_relu_ = on; }
  bool fused_relu() const { return fused_relu_; }
  Tensor& weight() { return *weight_; }
  Tensor& bias() { return *bias_; }
  const Conv2dOptions& options() const { return options_; }
  std::int64_t in_channels() const { return in_; }
  std::int64_t out_channels() const { return out_; }
  std::array<std::int64_t, 2> kernel_size() const { return kernel_; }

 private:
  std::int64_t in_, out_;
  std::array<std::int64_t, 2> kernel_;
  Conv2dOptions options_;
  bool fused_relu_ = false;
  Tensor* weight_ = nullptr;
  Tensor* bias_ = nullptr;
  Tensor no_bias_;
};

}  // namespace anvil::nn
