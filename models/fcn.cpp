// SPDX-License-Identifier: Apache-2.0
// Fully connected networks of networks.md: fcn5, fcn8 (DLBench, synthetic data), fcn_r
// (DLBench real-data FCN) and mlp_mnist (Kabakus). All end in logits; the loss is softmax
// cross-entropy (anvil::cross_entropy), applied by the training step, not by the model.
#include "engine/nn/layers.h"
#include "models/zoo.h"

namespace anvil::models {
namespace {

// in -> hidden[0] -> ... -> hidden[n-1] -> classes, `act` after each hidden layer, optional
// dropout after each activation.
nn::ModulePtr mlp(std::int64_t in, const std::vector<std::int64_t>& hidden, std::int64_t classes,
                  nn::Activation act, double dropout_p, Generator& gen) {
  auto net = std::make_shared<nn::Sequential>();
  std::int64_t width = in;
  for (std::int64_t h : hidden) {
    net->add(std::make_shared<nn::Linear>(width, h, true, &gen));
    net->add(std::make_shared<nn::ActivationLayer>(act));
    if (dropout_p > 0) net->add(std::make_shared<nn::Dropout>(dropout_p, &gen));
    width = h;
  }
  net->add(std::make_shared<nn::Linear>(width, classes, true, &gen));
  return net;
}

std::int64_t classes_or(const ModelOptions& o, std::int64_t def) {
  return o.num_classes > 0 ? o.num_classes : def;
}

}  // namespace

std::vector<ModelInfo> builtin_fcn_models() {
  std::vector<ModelInfo> v;
  v.push_back(
      {"fcn5",
       "DLBench FCN-5: 26752-2048-2048-2048-26752, sigmoid, softmax CE",
       {26752},
       InputKind::features,
       26752,
       64,
       {32, 64, 128, 256, 512, 1024},
       "sgd lr=0.01",
       [](const ModelOptions& o, Generator& g) {
         return mlp(26752, {2048, 2048, 2048}, classes_or(o, 26752), nn::Activation::sigmoid, 0, g);
       }});
  v.push_back({"fcn8",
               "DLBench FCN-8: 26752-2048x6-26752, sigmoid, softmax CE",
               {26752},
               InputKind::features,
               26752,
               64,
               {32, 64, 128, 256, 512, 1024},
               "sgd lr=0.01",
               [](const ModelOptions& o, Generator& g) {
                 return mlp(26752, std::vector<std::int64_t>(6, 2048), classes_or(o, 26752),
                            nn::Activation::sigmoid, 0, g);
               }});
  v.push_back(
      {"fcn_r",
       "DLBench real-data FCN: 784-2048-4096-1024-10, sigmoid, softmax CE",
       {784},
       InputKind::features,
       10,
       64,
       {32, 64, 128, 256, 512, 1024},
       "sgd lr=0.05",
       [](const ModelOptions& o, Generator& g) {
         return mlp(784, {2048, 4096, 1024}, classes_or(o, 10), nn::Activation::sigmoid, 0, g);
       }});
  v.push_back({"mlp_mnist",
               "Kabakus MNIST MLP: 784-512-512-10, ReLU, dropout 0.2",
               {784},
               InputKind::features,
               10,
               80,
               {80},
               "adam lr=1e-3",
               [](const ModelOptions& o, Generator& g) {
                 return mlp(784, {512, 512}, classes_or(o, 10), nn::Activation::relu, 0.2, g);
               }});
  // Linear, sigmoid/ReLU, dropout, softmax cross-entropy and the optimizers: all have CUDA
  // variants (docs/cuda.md).
  for (ModelInfo& m : v) m.gpu_path = true;
  return v;
}

}  // namespace anvil::models
