// SPDX-License-Identifier: Apache-2.0
#pragma once
// The result of the image readers (MNIST-format IDX in data/idx.h, CIFAR-10 in data/cifar.h): a
// whole split in memory, in the layout the CNNs and MLPs take directly.
//
// Images are float32 NCHW scaled to [0, 1] (byte / 255, so 255 maps to exactly 1.0f and every
// byte b is recovered as lround(x * 255)); labels are int64 class indices in [0, num_classes),
// which is what cross_entropy() takes. Nothing is normalised by a mean or standard deviation:
// that is the training program's choice, not the reader's.
#include <cstdint>
#include <string>
#include <vector>

#include "data/file_bytes.h"  // detail::read_file_bytes, for the readers
#include "engine/core/tensor.h"

namespace anvil::data {

struct ImageDataset {
  Tensor images;  // f32 [N, C, H, W], values in [0, 1]
  Tensor labels;  // i64 [N], values in [0, num_classes)
  std::int64_t num_classes = 0;
  std::string source;  // the file(s) it was read from, for messages and logs

  std::int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

}  // namespace anvil::data
