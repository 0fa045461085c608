// SPDX-License-Identifier: Apache-2.0
#pragma once
// The optimizer-table checks shared by the CPU and GPU tests (tests/test_optimizer_variants.cpp,
// tests/cuda/test_cuda_training.cpp) for what the op drivers' problems do not name (SGD's buffer
// creation step, nesterov, grad_norm's determinism, grad_scale's found_inf flag): lists of
// parameter/gradient/state tensors of mixed sizes, and one function per op that runs every
// variant of a harness's device (variant_harness.h) on a list and compares it, step by step,
// with `ref` run on the host on the same values. One step of every variant on every problem is
// the driver loop's (harness/drivers/optimizer_driver.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/dispatch/optimizer_problem.h"
#include "helpers/variant_harness.h"

namespace anvil::test {

// Parameter, gradient and two state tensors per entry, on one device.
struct TensorList {
  std::vector<Tensor> p, g, s1, s2;
  // A deep copy on `d`.
  TensorList to(Device d) const;
  // The multi-tensor entries; without state1 (sgd without momentum) its pointers are null.
  std::vector<OptimTensor> entries(bool first, bool with_state1 = true) const;
};

// Sizes around the CUDA chunk (16384 elements), odd sizes, one element and an empty tensor.
TensorList make_list(DType dtype, std::uint64_t seed,
                     const std::vector<std::int64_t>& sizes = {1, 7, 1000, 16383, 16384, 70001, 0});

OptimizerArgs args_for(OptimOp op, DType dtype, Device device, const std::vector<OptimTensor>& e);

// "" when every tensor of `got` is within `tol` of `want` (parameters, both states and the
// gradients), else the first that is not.
std::string compare_lists(const TensorList& want, const TensorList& got, double tol);

// A variant of a table by name (the test fails when it is not registered).
template <typename Table>
const typename Table::Variant& variant(Table& t, const std::string& name) {
  const auto* v = t.find(name);
  INFO("variant " << name << " of " << t.op());
  REQUIRE(v != nullptr);
  return *v;
}

// sgd_update: the buffer's creation step, then a blending step, every variant of the harness's
// device on `device` against ref on the host; `tol` on every element after each step.
void check_sgd_variants(VariantHarness& harness, DType dtype, Device device, const SgdHyper& h,
                        double tol, std::uint64_t seed);
// grad_norm: the variant's squared norm within relative `rel_tol` of ref's (and, when
// `deterministic`, the same bits on a second call); grad_scale (0.37): gradients equal to ref's,
// and with a found_inf flag (loss scaling) the flag set exactly when an inf or NaN was planted.
void check_grad_norm_variants(VariantHarness& harness, DType dtype, Device device, double rel_tol,
                              bool deterministic, std::uint64_t seed);
void check_grad_scale_variants(VariantHarness& harness, DType dtype, Device device,
                               std::uint64_t seed);

}  // namespace anvil::test
