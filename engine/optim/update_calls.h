// SPDX-License-Identifier: Apache-2.0
#pragma once
// The optimizer table calls of one update (engine/dispatch/optimizer_problem.h): parameters are
// sorted into one call per (device, dtype) list (Note [Multi-tensor optimizer calls]). Internal
// to engine/optim: shared by SGD, Adam/AdamW and gradient clipping.
#include <vector>

#include "engine/core/tensor.h"
#include "engine/dispatch/optimizer_problem.h"

namespace anvil::optim::detail {

// One table call: a problem and its list of tensors.
struct TableCall {
  OptimizerProblem problem;
  std::vector<OptimTensor> tensors;
};

// The call of `calls` for t's (device, dtype), appended (with `op`) when there is none yet.
TableCall& call_for(std::vector<TableCall>& calls, OptimOp op, const Tensor& t);
void add_tensor(TableCall& call, const OptimTensor& t);
// Runs `args` (hyper-parameters filled) once per non-empty call, with its problem and list.
void run_calls(std::vector<TableCall>& calls, OptimizerArgs args);
// The optimizers update dense parameters in place, on any device the tables serve: throws
// naming `where` unless p and g are contiguous floating tensors of one shape, dtype, device.
void check_param(const Tensor& p, const Tensor& g, const char* where);

}  // namespace anvil::optim::detail
