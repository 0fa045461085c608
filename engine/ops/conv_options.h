// SPDX-License-Identifier: Apache-2.0
#pragma once
// The geometry of a 2-D convolution beyond its tensors' shapes: one type for the differentiable
// conv2d (engine/autograd/functions.h), nn::Conv2d and the tensor-level ops (engine/ops/conv.h).
#include <array>
#include <cstdint>

namespace anvil {

struct Conv2dOptions {
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> padding{0, 0};
  std::array<std::int64_t, 2> dilation{1, 1};
  std::int64_t groups = 1;
};

}  // namespace anvil
