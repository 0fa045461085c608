// SPDX-License-Identifier: Apache-2.0
#pragma once
// Single output entries of a conv2d pass from the definition in engine/dispatch/conv_problem.h,
// in f64: what the conv2d driver's sampled check (Note [Sampled checks]) compares a variant's
// output with when the whole ref would take minutes. Internal to harness/.
#include <cstdint>

#include "engine/dispatch/conv_problem.h"

namespace anvil::harness {

// The host f64 operands of a case (dense NCHW / KCRS; b may be null without a bias, dy is read
// by the backward passes only).
struct ConvOperandsF64 {
  const double* x = nullptr;
  const double* w = nullptr;
  const double* b = nullptr;
  const double* dy = nullptr;
};

// Entry `flat` of the pass's output (y, dx or dw, by p.pass), with the bias and the fused relu of
// a forward problem.
double conv_output_entry(const ConvProblem& p, const ConvOperandsF64& in, std::int64_t flat);
// Entry k of db: the sum of dy over the batch and the output pixels of channel k.
double conv_bias_grad_entry(const ConvProblem& p, const ConvOperandsF64& in, std::int64_t k);

}  // namespace anvil::harness
