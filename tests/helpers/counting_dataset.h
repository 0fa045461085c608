// SPDX-License-Identifier: Apache-2.0
#pragma once
// A dataset whose samples name themselves, for the DataLoader tests (tests/test_data_loader*.cpp):
// sample i has inputs [width] all equal to i and target i, so a batch shows which samples it
// holds and whether inputs and targets stayed paired.
#include <cstdint>
#include <vector>

#include "data/loader.h"

namespace anvil::test {

inline data::TensorDataset counting_dataset(std::int64_t n, std::int64_t width) {
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t j = 0; j < width; ++j) x.push_back(static_cast<float>(i));
    y.push_back(i);
  }
  return {Tensor::from_vector(x, {n, width}), Tensor::from_vector(y, {n})};
}

}  // namespace anvil::test
