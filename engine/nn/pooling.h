// SPDX-License-Identifier: Apache-2.0
#pragma once
// Pooling layers (NCHW): MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, GlobalAvgPool2d.
// Parameter-free; the geometry rules are PyTorch's (Note [Pool output size]).
#include <array>
#include <cstdint>

#include "engine/autograd/functions.h"
#include "engine/nn/module.h"

namespace anvil::nn {

// max_pool2d with fixed options; e.g. MaxPool2d({.kernel = {3, 3}, .stride = {2, 2}}).
class MaxPool2d final : public Module {
 public:
  explicit MaxPool2d(Pool2dOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;
  Shape output_shape(const Shape& in) const override;
  // One comparison per window element and output (the usual summary convention).
  double forward_flops(const Shape& in) const override;
  // One problem, op "max_pool2d": the forward PoolProblem at `in`, named `prefix` without its
  // trailing '.'.
  void problems(const Shape& in, const std::string& prefix,
                std::vector<NamedProblem>& out) const override;
  const Pool2dOptions& options() const { return options_; }

 private:
  Pool2dOptions options_;
};

// avg_pool2d with fixed options (count_include_pad as in the options; PyTorch's default true).
class AvgPool2d final : public Module {
 public:
  explicit AvgPool2d(Pool2dOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;
  Shape output_shape(const Shape& in) const override;
  double forward_flops(const Shape& in) const override;  // one addition per window element
  void problems(const Shape& in, const std::string& prefix,
                std::vector<NamedProblem>& out) const override;  // "avg_pool2d"
  const Pool2dOptions& options() const { return options_; }

 private:
  Pool2dOptions options_;
};

// Adaptive average pooling to a fixed [OH, OW] (PyTorch's bins).
class AdaptiveAvgPool2d final : public Module {
 public:
  explicit AdaptiveAvgPool2d(std::array<std::int64_t, 2> output_size);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override;
  Shape output_shape(const Shape& in) const override;
  double forward_flops(const Shape& in) const override;  // one addition per binned element
  void problems(const Shape& in, const std::string& prefix,
                std::vector<NamedProblem>& out) const override;  // "adaptive_avg_pool2d"
  std::array<std::int64_t, 2> output_size() const { return output_size_; }

 private:
  std::array<std::int64_t, 2> output_size_;
};

// Mean over H and W: [N, C, H, W] -> [N, C] (adaptive average pooling to 1x1, flattened).
class GlobalAvgPool2d final : public Module {
 public:
  GlobalAvgPool2d() = default;
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GlobalAvgPool2d"; }
  Shape output_shape(const Shape& in) const override;
  double forward_flops(const Shape& in) const override;
  void problems(const Shape& in, const std::string& prefix,
                std::vector<NamedProblem>& out) const override;  // "adaptive_avg_pool2d"
};

}  // namespace anvil::nn
