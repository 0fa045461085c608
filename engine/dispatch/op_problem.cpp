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
    const char* operator()(const ElementwiseProblem&) const { return "elementwise"; }
    const char* operator()(const ReduceProblem&) const { return "reduce"; }
    const char* operator()(const SoftmaxProblem&) const { return "softmax"; }
    const char* operator()(const EmbeddingProblem&) const { return "embedding"; }
    const char* operator()(const DropoutProblem&) const { return "dropout"; }
    const char* operator()(const OptimizerProblem& q) const { return optim_op_name(q.op); }
  };
  return std::visit(Name{}, p);
}

}  // namespace anvil
