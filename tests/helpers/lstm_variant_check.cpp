// SPDX-License-Identifier: Apache-2.0
// The shared lstm variant check (tests/helpers/lstm_variant_check.h).
#include "helpers/lstm_variant_check.h"

#include "engine/dispatch/selection.h"
#include "helpers/gradcheck.h"
#include "helpers/variant_harness.h"

namespace anvil::test {

std::vector<std::pair<std::string, LstmProblem>> lstm_passes(const LayerCase& c, DType dt,
                                                             Device device) {
  std::vector<std::pair<std::string, LstmProblem>> out;
  for (LstmPass pass :
       {LstmPass::forward_inference, LstmPass::forward_training, LstmPass::backward}) {
    const LstmProblem p{c.T, c.B, c.I, c.H, c.two_biases, c.state, pass, dt, device};
    out.emplace_back(lstm_pass_name(pass), p);
  }
  return out;
}

LstmRun run_lstm_case(const LayerCase& c, DType dt, Device device, std::uint64_t seed) {
  LstmRun r;
  r.in = layer_leaves(c, dt, seed, device);
  r.out = run_layer(r.in);
  weighted_loss(r.out, 3).backward();
  return r;
}

LstmRun run_lstm_oracle(const LayerCase& c, DType dt, std::uint64_t seed) {
  ForceVariant force("lstm", kLstmOracle);
  return run_lstm_case(c, dt, Device::cpu(), seed);
}

std::string compare_lstm_runs(const LstmRun& oracle, const LstmRun& got, double out_tol,
                              double grad_tol) {
  std::string bad = compare("y", got.out.y, oracle.out.y, out_tol) +
                    compare("h_n", got.out.h_n, oracle.out.h_n, out_tol) +
                    compare("c_n", got.out.c_n, oracle.out.c_n, out_tol);
  for (int i = 0; i < 7; ++i) {
    if (!oracle.in[i].defined()) continue;
    const std::string what = std::string("gradient of ") + kLeafNames[i] + " (max |ref| " +
                             std::to_string(max_abs(oracle.in[i].grad())) + ")";
    if (!got.in[i].grad().defined())
      bad += what + ": not computed; ";
    else
      bad += compare(what, got.in[i].grad(), oracle.in[i].grad(), grad_tol);
  }
  return bad;
}

}  // namespace anvil::test
