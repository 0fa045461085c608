// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers shared by the distributed tests: a small classifier, synthetic data and training
// loops (plain, data-parallel) whose parameters the tests compare.
#include <cstdint>
#include <vector>

#include "anvil/anvil.h"
#include "engine/distributed/data_parallel.h"

namespace anvil::test {

// 3-layer MLP (in 12, hidden 32 and 24, 5 classes), initialised from `seed`.
nn::ModulePtr small_mlp(std::uint64_t seed);
// `n` samples: inputs [n, 12] f32 and labels [n] i64, from `seed`.
struct Synthetic {
  Tensor x, y;
};
Synthetic synthetic_data(std::int64_t n, std::uint64_t seed);
// Rows [begin, begin + count) of a batch-major tensor, as a copy.
Tensor rows(const Tensor& t, std::int64_t begin, std::int64_t count);
// All parameter values in one f64 vector.
std::vector<double> flat_values(const nn::Module& net);

}  // namespace anvil::test
