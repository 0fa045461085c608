// SPDX-License-Identifier: Apache-2.0
// The problem of any table a model's layers run (engine/dispatch/op_problem.h).
#include "engine/dispatch/op_problem.h"

namespace anvil {

const char* op_name(const OpProblem& p) {
  struct Name {
    const char* operator()(const GemmProblem&) const { return "gemm"; }
    const char* operator()(const ConvProblem&) const { return "conv2d"; }
    const char* operator()(const PoolProblem& q) const { return pool_op_name(q.kind); }
    const char* operator()(const BatchNormProblem&) const { return "batch_norm2d"; }
    const char* operator()(const LstmProblem&) const { return "lstm"; }
  };
  return std::visit(Name{}, p);
}

}  // namespace anvil
