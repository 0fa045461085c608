// SPDX-License-Identifier: Apache-2.0
#pragma once
// nn::BatchNorm2d: per-channel batch normalisation of NCHW inputs (PyTorch semantics).
#include <cstdint>

#include "engine/autograd/functions.h"
#include "engine/nn/module.h"

namespace anvil::nn {

// Parameters "weight" (ones) and "bias" (zeros), buffers "running_mean" (zeros) and
// "running_var" (ones), all [channels]. In training mode (is_training()) forward normalises with
// the batch statistics and updates the running ones in place (momentum, unbiased variance); in
// eval mode it normalises with the running statistics.
class BatchNorm2d final : public Module {
 public:
  explicit BatchNorm2d(std::int64_t channels, double eps = 1e-5, double momentum = 0.1);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BatchNorm2d"; }
  std::string extra_repr() const override;
  Shape output_shape(const Shape& in) const override;
  // Two FLOPs per element (one multiply-add once scale and shift are folded per channel).
  double forward_flops(const Shape& in) const override;
  // One problem, op "batch_norm2d": the forward problem of the current mode at `in`, named
  // `prefix` without its trailing '.'.
  void problems(const Shape& in, const std::string& prefix,
                std::vector<NamedProblem>& out) const override;

  Tensor& weight() { return *weight_; }
  Tensor& bias() { return *bias_; }
  Tensor& running_mean() { return *running_mean_; }
  Tensor& running_var() { return *running_var_; }
  std::int64_t channels() const { return channels_; }
  double eps() const { return eps_; }
  double momentum() const { return momentum_; }

 private:
  std::int64_t channels_;
  double eps_, momentum_;
  Tensor* weight_ = nullptr;
  Tensor* bias_ = nullptr;
  Tensor* running_mean_ = nullptr;
  Tensor* running_var_ = nullptr;
};

}  // namespace anvil::nn
