// SPDX-License-Identifier: Apache-2.0
#pragma once
// ResNet-50 building blocks (networks.md): the bottleneck block with its optional projection
// shortcut, and the whole network in torchvision's layout and parameter names
// (conv1, bn1, layer1.0.conv1, layer1.0.downsample.0, ..., fc).
#include "engine/core/random.h"
#include "engine/nn/batch_norm.h"
#include "engine/nn/conv.h"
#include "engine/nn/layers.h"

namespace anvil::models {

// x -> 1x1 (in->width) -> BN -> ReLU -> 3x3 stride s (width->width) -> BN -> ReLU
//   -> 1x1 (width->4*width) -> BN, plus the shortcut (identity, or 1x1 stride s conv + BN when the
// shape changes), then ReLU. The stride sits on the 3x3 conv (torchvision's "ResNet v1.5").
class Bottleneck final : public nn::Module {
 public:
  Bottleneck(std::int64_t in_channels, std::int64_t width, std::int64_t stride, Generator& gen);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Bottleneck"; }
  std::string extra_repr() const override;
  Shape output_shape(const Shape& in) const override;
  double forward_flops(const Shape& in) const override;
  void problems(const Shape& in, const std::string& prefix,
                std::vector<nn::NamedProblem>& out) const override;

 private:
  std::int64_t in_, width_, stride_;
  std::shared_ptr<nn::Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<nn::BatchNorm2d> bn1_, bn2_, bn3_;
  std::shared_ptr<nn::Sequential> downsample_;  // null for the identity shortcut
};

nn::ModulePtr resnet50(std::int64_t classes, Generator& gen);

}  // namespace anvil::models
