// SPDX-License-Identifier: Apache-2.0
#pragma once
// The built-in model families, one file each (fcn.cpp, cnn.cpp + resnet.cpp, lstm.cpp).
#include <vector>

#include "models/registry.h"

namespace anvil::models {

std::vector<ModelInfo> builtin_fcn_models();   // fcn5, fcn8, fcn_r, mlp_mnist
std::vector<ModelInfo> builtin_cnn_models();   // alexnet, vgg16, resnet50, cnn_mnist, cnn_cifar
std::vector<ModelInfo> builtin_lstm_models();  // lstm32, lstm64, ptb_small, lstm_imdb

}  // namespace anvil::models
