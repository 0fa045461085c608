// SPDX-License-Identifier: Apache-2.0
#pragma once
// The lstm variant check shared by tests/test_lstm.cpp (CPU) and tests/cuda/test_cuda_lstm.cpp
// (GPU) on the variant harness (tests/helpers/variant_harness.h): one layer case run forward and
// backward (weighted loss) under the oracle on the CPU and under a variant on its device, the
// outputs, final states and every gradient compared.
//
// Note [LSTM oracle]
// The lstm tests compare every variant with kLstmOracle run on the CPU. It is `ref`, as before
// the harness; issue 24 point 1 ("the LSTM ref variant runs") is about ref running every problem
// (its own worktree). Should the oracle have to change (a faster exact variant, or ref refusing
// a problem), this constant is the one place: the harness then still runs ref as a variant like
// any other, checked against the oracle.
#include <string>
#include <utility>
#include <vector>

#include "engine/dispatch/lstm_problem.h"
#include "helpers/lstm_layer_case.h"

namespace anvil::test {

inline constexpr const char* kLstmOracle = "ref";

// The passes one case runs (forward_inference, forward_training, backward) for the harness's
// support question.
std::vector<std::pair<std::string, LstmProblem>> lstm_passes(const LayerCase& c, DType dt,
                                                             Device device);

// One case's leaves (from `seed`, on `device`), outputs and gradients after
// weighted_loss(out, 3).backward(), under whatever lstm (and gemm) variant is forced.
struct LstmRun {
  std::vector<Tensor> in;
  LstmLayerOutput out;
};
LstmRun run_lstm_case(const LayerCase& c, DType dt, Device device, std::uint64_t seed);
// Runs the case under kLstmOracle on the CPU.
LstmRun run_lstm_oracle(const LayerCase& c, DType dt, std::uint64_t seed);

// "" when y, h_n and c_n are within out_tol of the oracle's and every gradient within grad_tol;
// else what differs (max |ref| shown with each gradient).
std::string compare_lstm_runs(const LstmRun& oracle, const LstmRun& got, double out_tol,
                              double grad_tol);

}  // namespace anvil::test
