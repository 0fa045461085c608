// SPDX-License-Identifier: Apache-2.0
#pragma once
// The float64 central-difference gradient check, written once and used for every differentiable
// op (DESIGN.md, Tests).
//
// Note [Gradient check]
// For f: inputs -> Y, the check draws a fixed random f64 tensor R of Y's shape and compares, for
// every element x_j of every input that requires grad,
//   analytic  d/dx_j sum(f(x) * R)   (Y.backward(R), i.e. the autograd vector-Jacobian product)
//   numeric   (L(x + eps e_j) - L(x - eps e_j)) / (2 eps),   L(x) = sum(f(x) * R) in double.
// Weighting by a random R makes every output element matter (a plain sum would hide errors
// that cancel, e.g. a softmax gradient off by a per-row constant). An element passes when
// |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|). On failure the message
// names the op, the input index, the element's position and both values of the worst element.
// Inputs are perturbed in place through their strides (non-contiguous leaves are fine); inputs
// with overlapping elements (stride 0, size > 1) are refused. The function must be
// deterministic (re-seed any Generator inside it, see the dropout test).
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/core/random.h"
#include "engine/core/tensor.h"

namespace anvil::test {

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-6;
  double rtol = 1e-5;
  std::uint64_t seed = 0x5eedULL;  // for R
};

struct GradcheckResult {
  bool ok = false;
  std::string message;       // the worst element (or what went wrong); a summary when ok
  double worst_ratio = 0;    // max |a - n| / (atol + rtol * max(|a|, |n|)); ok iff <= 1
  std::int64_t checked = 0;  // elements compared
};

GradcheckResult gradcheck(const std::string& name, const TensorFn& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opts = {});

// ---- input helpers ------------------------------------------------------------------------
// Values of any tensor in row-major order, converted to double.
std::vector<double> values_f64(const Tensor& t);
// A new f64 leaf with U(low, high) values (requires grad unless told otherwise).
Tensor uniform_leaf(const Shape& shape, double low, double high, std::uint64_t seed,
                    bool requires_grad = true);
// Like uniform_leaf, but |value| >= margin everywhere (signs random): for kinks at 0 (relu).
Tensor away_from_zero_leaf(const Shape& shape, double margin, double high, std::uint64_t seed);
// An f64 leaf holding a random permutation of {0, spacing, 2*spacing, ...} + offset: distinct
// values far apart, so max/argmax do not change under the eps perturbation.
Tensor distinct_leaf(const Shape& shape, double spacing, std::uint64_t seed);
// Max |a - b| over elements (shapes must match).
double max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace anvil::test

// Runs anvil::test::gradcheck and records a Catch2 check with the report as context.
#define ANVIL_CHECK_GRADCHECK(...)                                       \
  do {                                                                   \
    const auto anvil_gc_result_ = ::anvil::test::gradcheck(__VA_ARGS__); \
    INFO(anvil_gc_result_.message);                                      \
    CHECK(anvil_gc_result_.ok);                                          \
  } while (0)
