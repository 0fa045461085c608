// SPDX-License-Identifier: Apache-2.0
// LSTM problem descriptor (engine/dispatch/lstm_problem.h).
#include "engine/dispatch/lstm_problem.h"

#include "engine/core/error.h"
#include "engine/dispatch/registration.h"

namespace anvil {

const char* lstm_pass_name(LstmPass p) {
  switch (p) {
    case LstmPass::forward_inference:
      return "forward_inference";
    case LstmPass::forward_training:
      return "forward_training";
    case LstmPass::backward:
      return "backward";
  }
  return "?";
}

std::string LstmProblem::key() const {
  return detail::str_cat(dtype_name(dtype), ' ', device.str(), ' ', lstm_pass_name(pass), ' ', T,
                         ' ', B, ' ', I, ' ', H, ' ', two_biases, ' ', has_initial_state);
}

std::string LstmProblem::repr() const {
  return detail::str_cat("lstm ", dtype_name(dtype), ' ', device.str(), ' ', lstm_pass_name(pass),
                         " T=", T, " B=", B, " I=", I, " H=", H, " biases=", two_biases ? 2 : 1,
                         " state=", has_initial_state ? 1 : 0);
}

double LstmProblem::flops() const {
  const double tb = static_cast<double>(T) * B;
  const double gemm = 2.0 * tb * 4.0 * H * (static_cast<double>(I) + H);
  const double pointwise = 10.0 * tb * H;
  return pass == LstmPass::backward ? 2.0 * gemm + 2.0 * pointwise : gemm + pointwise;
}

double LstmProblem::bytes() const {
  const double e = static_cast<double>(dtype_size(dtype));
  const double tb = static_cast<double>(T) * B;
  const double weights = 4.0 * H * (static_cast<double>(I) + H + (two_biases ? 2 : 1));
  const double io = tb * (I + H) + 4.0 * B * H;
  return e * (pass == LstmPass::backward ? 2.0 * (weights + io) : weights + io);
}

LstmTable& lstm_table() {
  static LstmTable table("lstm");
  register_builtin_kernels();  // fills the table on first use
  return table;
}

}  // namespace anvil
