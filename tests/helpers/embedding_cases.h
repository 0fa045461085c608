// SPDX-License-Identifier: Apache-2.0
#pragma once
// Ids and a bit comparison for tests/cuda/test_cuda_embedding.cpp's check of the default path
// (ops::embedding on the GPU against ref). Every variant against ref is the embedding driver's
// (harness/drivers/embedding_driver.cpp).
#include <cstdint>

#include "engine/core/tensor.h"

namespace anvil::test {

// n ids in [0, rows), skewed towards small ids, as i32 or i64 on the host.
Tensor random_ids(std::int64_t n, std::int64_t rows, DType dtype, std::uint64_t seed);
// Same dtype, shape and bytes (any devices).
bool bit_equal(const Tensor& a, const Tensor& b);

}  // namespace anvil::test
