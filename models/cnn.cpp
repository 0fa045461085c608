// SPDX-License-Identifier: Apache-2.0
// Convolutional networks of networks.md: alexnet, vgg16 and resnet50 (DLBench, synthetic data),
// cnn_mnist and cnn_cifar (the Keras examples Al-Bdour timed). All end in logits; the loss is
// softmax cross-entropy, applied by the training step.
//
// Note [Fused conv relu in the zoo]
// A convolution directly followed by ReLU is built as one Conv2d with set_fused_relu(true): the
// selected conv variant then fuses the ReLU (oneDNN post-op) where it can, and runs conv + relu
// otherwise (engine/autograd/functions_conv.cpp). The layer table therefore shows one row for
// "conv + relu"; parameters and FLOPs are unchanged.
#include "engine/nn/batch_norm.h"
#include "engine/nn/conv.h"
#include "engine/nn/layers.h"
#include "engine/nn/pooling.h"
#include "models/resnet.h"
#include "models/zoo.h"

namespace anvil::models {
namespace {

std::shared_ptr<nn::Conv2d> conv_relu(std::int64_t in, std::int64_t out, std::int64_t k,
                                      std::int64_t stride, std::int64_t pad, Generator& gen) {
  Conv2dOptions o;
  o.stride = {stride, stride};
  o.padding = {pad, pad};
  auto c = std::make_shared<nn::Conv2d>(in, out, std::array<std::int64_t, 2>{k, k}, o, true, &gen);
  c->set_fused_relu(true);
  return c;
}

std::shared_ptr<nn::MaxPool2d> max_pool(std::int64_t k, std::int64_t stride) {
  Pool2dOptions o;
  o.kernel = {k, k};
  o.stride = {stride, stride};
  return std::make_shared<nn::MaxPool2d>(o);
}

std::int64_t classes_or(const ModelOptions& o, std::int64_t def) {
  return o.num_classes > 0 ? o.num_classes : def;
}

// AlexNet, single tower, no LRN (networks.md table), with the Caffe form's dropout 0.5 after
// fc6 and fc7, as the PyTorch peer has it (bench/peers/pytorch_models.py).
nn::ModulePtr alexnet(std::int64_t classes, Generator& gen) {
  auto net = std::make_shared<nn::Sequential>();
  net->add(conv_relu(3, 96, 11, 4, 2, gen), "conv1");
  net->add(max_pool(3, 2), "pool1");
  net->add(conv_relu(96, 256, 5, 1, 2, gen), "conv2");
  net->add(max_pool(3, 2), "pool2");
  net->add(conv_relu(256, 384, 3, 1, 1, gen), "conv3");
  net->add(conv_relu(384, 384, 3, 1, 1, gen), "conv4");
  net->add(conv_relu(384, 256, 3, 1, 1, gen), "conv5");
  net->add(max_pool(3, 2), "pool5");
  net->add(std::make_shared<nn::Flatten>(), "flatten");
  net->add(std::make_shared<nn::Linear>(9216, 4096, true, &gen), "fc6");
  net->add(nn::ReLU(), "relu6");
  net->add(std::make_shared<nn::Dropout>(0.5, &gen), "drop6");
  net->add(std::make_shared<nn::Linear>(4096, 4096, true, &gen), "fc7");
  net->add(nn::ReLU(), "relu7");
  net->add(std::make_shared<nn::Dropout>(0.5, &gen), "drop7");
  net->add(std::make_shared<nn::Linear>(4096, classes, true, &gen), "fc8");
  return net;
}

// VGG16 (configuration D): 13 conv 3x3 pad 1 + ReLU, 2x2/2 max-pools, adaptive average pool to
// 7x7 (so 32x32 CIFAR images work too: 1x1 is spread over the 7x7 grid), then the classifier.
nn::ModulePtr vgg16(std::int64_t classes, Generator& gen) {
  auto features = std::make_shared<nn::Sequential>();
  const std::int64_t M = 0;  // a max-pool in the configuration list
  const std::int64_t config[] = {64, 64,  M,   128, 128, M,   256, 256, 256,
                                 M,  512, 512, 512, M,   512, 512, 512, M};
  std::int64_t in = 3;
  for (std::int64_t v : config) {
    if (v == M) {
      features->add(max_pool(2, 2));
    } else {
      features->add(conv_relu(in, v, 3, 1, 1, gen));
      in = v;
    }
  }
  auto classifier = std::make_shared<nn::Sequential>();
  classifier->add(std::make_shared<nn::Linear>(512 * 7 * 7, 4096, true, &gen));
  classifier->add(nn::ReLU());
  classifier->add(std::make_shared<nn::Dropout>(0.5, &gen));
  classifier->add(std::make_shared<nn::Linear>(4096, 4096, true, &gen));
  classifier->add(nn::ReLU());
  classifier->add(std::make_shared<nn::Dropout>(0.5, &gen));
  classifier->add(std::make_shared<nn::Linear>(4096, classes, true, &gen));
  auto net = std::make_shared<nn::Sequential>();
  net->add(features, "features");
  net->add(std::make_shared<nn::AdaptiveAvgPool2d>(std::array<std::int64_t, 2>{7, 7}), "avgpool");
  net->add(std::make_shared<nn::Flatten>(), "flatten");
  net->add(classifier, "classifier");
  return net;
}

// Keras MNIST CNN: two 3x3 valid convs, max-pool 2, dropout, fc 9216 -> 128 -> 10.
nn::ModulePtr cnn_mnist(std::int64_t classes, Generator& gen) {
  auto net = std::make_shared<nn::Sequential>();
  net->add(conv_relu(1, 32, 3, 1, 0, gen), "conv1");
  net->add(conv_relu(32, 64, 3, 1, 0, gen), "conv2");
  net->add(max_pool(2, 2), "pool");
  net->add(std::make_shared<nn::Dropout>(0.25, &gen), "drop1");
  net->add(std::make_shared<nn::Flatten>(), "flatten");
  net->add(std::make_shared<nn::Linear>(9216, 128, true, &gen), "fc1");
  net->add(nn::ReLU(), "relu");
  net->add(std::make_shared<nn::Dropout>(0.5, &gen), "drop2");
  net->add(std::make_shared<nn::Linear>(128, classes, true, &gen), "fc2");
  return net;
}

// Keras CIFAR-10 CNN: (same conv, valid conv, pool, dropout) x2 with 32 and 64 channels, then
// fc 2304 -> 512 -> 10.
nn::ModulePtr cnn_cifar(std::int64_t classes, Generator& gen) {
  auto net = std::make_shared<nn::Sequential>();
  net->add(conv_relu(3, 32, 3, 1, 1, gen), "conv1");
  net->add(conv_relu(32, 32, 3, 1, 0, gen), "conv2");
  net->add(max_pool(2, 2), "pool1");
  net->add(std::make_shared<nn::Dropout>(0.25, &gen), "drop1");
  net->add(conv_relu(32, 64, 3, 1, 1, gen), "conv3");
  net->add(conv_relu(64, 64, 3, 1, 0, gen), "conv4");
  net->add(max_pool(2, 2), "pool2");
  net->add(std::make_shared<nn::Dropout>(0.25, &gen), "drop2");
  net->add(std::make_shared<nn::Flatten>(), "flatten");
  net->add(std::make_shared<nn::Linear>(2304, 512, true, &gen), "fc1");
  net->add(nn::ReLU(), "relu");
  net->add(std::make_shared<nn::Dropout>(0.5, &gen), "drop3");
  net->add(std::make_shared<nn::Linear>(512, classes, true, &gen), "fc2");
  return net;
}

}  // namespace

std::vector<ModelInfo> builtin_cnn_models() {
  std::vector<ModelInfo> v;
  v.push_back(
      {"alexnet",
       "AlexNet (DLBench single tower, no LRN): 5 conv + 3 fc, 224x224x3",
       {3, 224, 224},
       InputKind::features,
       1000,
       16,
       {16, 32, 64, 128},
       "sgd lr=0.01",
       [](const ModelOptions& o, Generator& g) { return alexnet(classes_or(o, 1000), g); }});
  v.push_back({"vgg16",
               "VGG16: 13 conv 3x3 + 3 fc, adaptive avg pool 7x7, 224x224x3 (32x32 works)",
               {3, 224, 224},
               InputKind::features,
               1000,
               16,
               {16, 32, 64},
               "sgd lr=0.01 momentum=0.9",
               [](const ModelOptions& o, Generator& g) { return vgg16(classes_or(o, 1000), g); }});
  v.push_back(
      {"resnet50",
       "ResNet-50 (torchvision form, stride on the 3x3), BN in training mode",
       {3, 224, 224},
       InputKind::features,
       1000,
       16,
       {8, 16, 32, 64},
       "sgd lr=0.01 momentum=0.9",
       [](const ModelOptions& o, Generator& g) { return resnet50(classes_or(o, 1000), g); }});
  v.push_back(
      {"cnn_mnist",
       "Keras MNIST CNN: conv32-conv64-pool-fc128-fc10, dropout",
       {1, 28, 28},
       InputKind::features,
       10,
       128,
       {128},
       "adam lr=1e-3",
       [](const ModelOptions& o, Generator& g) { return cnn_mnist(classes_or(o, 10), g); }});
  v.push_back(
      {"cnn_cifar",
       "Keras CIFAR-10 CNN: 2x(conv-conv-pool-dropout)-fc512-fc10",
       {3, 32, 32},
       InputKind::features,
       10,
       32,
       {32},
       "adam lr=1e-3",
       [](const ModelOptions& o, Generator& g) { return cnn_cifar(classes_or(o, 10), g); }});
  // GPU path (ModelInfo::gpu_path): every op of the five CNNs has CUDA variants: conv2d
  // (cuda.cudnn and the rest, kernels/cuda/conv_cudnn.cpp, conv_im2col.cpp), max / average /
  // adaptive pooling and batch norm (kernels/cuda/pool_*.cpp, batch_norm_*.cpp), linear, ReLU,
  // dropout and the loss. Not yet run on a GPU (docs/cuda.md).
  constexpr bool kCnnGpuPath = true;
  for (ModelInfo& m : v) m.gpu_path = kCnnGpuPath;
  return v;
}

}  // namespace anvil::models
