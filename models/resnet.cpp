// SPDX-License-Identifier: Apache-2.0
// ResNet-50 (models/resnet.h).
#include "models/resnet.h"

#include "engine/autograd/functions.h"
#include "engine/core/error.h"
#include "engine/nn/pooling.h"

namespace anvil::models {
namespace {

std::shared_ptr<nn::Conv2d> conv(std::int64_t in, std::int64_t out, std::int64_t k,
                                 std::int64_t stride, Generator& gen) {
  Conv2dOptions o;
  o.stride = {stride, stride};
  o.padding = {k / 2, k / 2};
  return std::make_shared<nn::Conv2d>(in, out, std::array<std::int64_t, 2>{k, k}, o, /*bias=*/false,
                                      &gen);
}

}  // namespace

Bottleneck::Bottleneck(std::int64_t in_channels, std::int64_t width, std::int64_t stride,
                       Generator& gen)
    : in_(in_channels), width_(width), stride_(stride) {
  conv1_ = register_module("conv1", conv(in_channels, width, 1, 1, gen));
  bn1_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(width));
  conv2_ = register_module("conv2", conv(width, width, 3, stride, gen));
  bn2_ = register_module("bn2", std::make_shared<nn::BatchNorm2d>(width));
  conv3_ = register_module("conv3", conv(width, 4 * width, 1, 1, gen));
  bn3_ = register_module("bn3", std::make_shared<nn::BatchNorm2d>(4 * width));
  if (stride != 1 || in_channels != 4 * width) {
    downsample_ = std::make_shared<nn::Sequential>();
    downsample_->add(conv(in_channels, 4 * width, 1, stride, gen));
    downsample_->add(std::make_shared<nn::BatchNorm2d>(4 * width));
    register_module("downsample", downsample_);
  }
}

Tensor Bottleneck::forward(const Tensor& x) {
  Tensor y = relu(bn1_->forward(conv1_->forward(x)));
  y = relu(bn2_->forward(conv2_->forward(y)));
  y = bn3_->forward(conv3_->forward(y));
  return relu(y + (downsample_ ? downsample_->forward(x) : x));
}

std::string Bottleneck::extra_repr() const {
  return "in=" + std::to_string(in_) + ", width=" + std::to_string(width_) +
         ", stride=" + std::to_string(stride_) + (downsample_ ? ", projection" : "");
}

Shape Bottleneck::output_shape(const Shape& in) const {
  ANVIL_CHECK(in.size() == 4 && in[1] == in_, "Bottleneck", "expected input [N, ", in_,
              ", H, W], got ", shape_str(in));
  return conv3_->output_shape(conv2_->output_shape(conv1_->output_shape(in)));
}

double Bottleneck::forward_flops(const Shape& in) const {
  const Shape s1 = conv1_->output_shape(in), s2 = conv2_->output_shape(s1),
              s3 = conv3_->output_shape(s2);
  double f = conv1_->forward_flops(in) + bn1_->forward_flops(s1) + conv2_->forward_flops(s1) +
             bn2_->forward_flops(s2) + conv3_->forward_flops(s2) + bn3_->forward_flops(s3);
  if (downsample_) f += downsample_->forward_flops(in);
  return f;
}

void Bottleneck::problems(const Shape& in, const std::string& prefix,
                          std::vector<nn::NamedProblem>& out) const {
  const Shape s1 = conv1_->output_shape(in), s2 = conv2_->output_shape(s1),
              s3 = conv3_->output_shape(s2);
  conv1_->problems(in, prefix + "conv1.", out);
  bn1_->problems(s1, prefix + "bn1.", out);
  conv2_->problems(s1, prefix + "conv2.", out);
  bn2_->problems(s2, prefix + "bn2.", out);
  conv3_->problems(s2, prefix + "conv3.", out);
  bn3_->problems(s3, prefix + "bn3.", out);
  if (downsample_) downsample_->problems(in, prefix + "downsample.", out);
}

nn::ModulePtr resnet50(std::int64_t classes, Generator& gen) {
  auto net = std::make_shared<nn::Sequential>();
  net->add(conv(3, 64, 7, 2, gen), "conv1");
  net->add(std::make_shared<nn::BatchNorm2d>(64), "bn1");
  net->add(nn::ReLU(), "relu");
  Pool2dOptions pool;
  pool.kernel = {3, 3};
  pool.stride = {2, 2};
  pool.padding = {1, 1};
  net->add(std::make_shared<nn::MaxPool2d>(pool), "maxpool");
  std::int64_t in = 64;
  const std::int64_t widths[4] = {64, 128, 256, 512}, blocks[4] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    auto layer = std::make_shared<nn::Sequential>();
    for (std::int64_t b = 0; b < blocks[stage]; ++b) {
      const std::int64_t stride = (b == 0 && stage > 0) ? 2 : 1;
      layer->add(std::make_shared<Bottleneck>(in, widths[stage], stride, gen));
      in = 4 * widths[stage];
    }
    net->add(layer, "layer" + std::to_string(stage + 1));
  }
  net->add(std::make_shared<nn::GlobalAvgPool2d>(), "avgpool");
  net->add(std::make_shared<nn::Linear>(2048, classes, true, &gen), "fc");
  return net;
}

}  // namespace anvil::models
