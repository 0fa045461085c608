// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the tests that follow an optimizer against its documented update written out in f64
// share (test_adam_param_steps.cpp, test_sgd_param_groups.cpp): 1-D f64 parameters made from
// and read back into vectors, gradients that differ per parameter, element and step, and the
// distance of a parameter from its reference.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/core/tensor.h"

namespace anvil::test {

// A 1-D f64 tensor holding `v`.
inline Tensor f64_tensor(const std::vector<double>& v) {
  return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())});
}

// The values of a contiguous f64 tensor.
inline std::vector<double> f64_values(const Tensor& t) {
  return std::vector<double>(t.data<double>(), t.data<double>() + t.numel());
}

// n gradient values for parameter `which` in step `step`: sin(1.3 step + 0.7 which + i).
inline std::vector<double> step_gradient(std::size_t n, int step, int which) {
  std::vector<double> g;
  for (std::size_t i = 0; i < n; ++i)
    g.push_back(std::sin(1.3 * step + 0.7 * which + static_cast<double>(i)));
  return g;
}

// Largest |got - want| / (|want| + floor) over the elements.
inline double max_relative_error(const Tensor& got, const std::vector<double>& want, double floor) {
  const auto g = f64_values(got);
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i)
    worst = std::max(worst, std::abs(g[i] - want[i]) / (std::abs(want[i]) + floor));
  return worst;
}

}  // namespace anvil::test
