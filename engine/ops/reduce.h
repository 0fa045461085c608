// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reductions without autograd (f32/f64, on the input's device: CPU or CUDA).
#include <vector>

#include "engine/core/tensor.h"

namespace anvil::ops {

// Sum (or mean) over `dims` (empty = all dims); keepdim keeps them as size 1.
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
// Max over one dim: values and int64 indices.
std::pair<Tensor, Tensor> max(const Tensor& x, std::int64_t dim, bool keepdim = false);
// Sums a broadcast gradient back down to `shape` (the inverse of broadcasting shape -> g's shape).
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace anvil::ops
