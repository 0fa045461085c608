// SPDX-License-Identifier: Apache-2.0
// The optimizer table calls of one update (engine/optim/update_calls.h).
#include "engine/optim/update_calls.h"

#include <utility>

namespace anvil::optim::detail {

void check_param(const Tensor& p, const Tensor& g, const char* where) {
  ANVIL_CHECK(is_floating(p.dtype()), where, "parameters must be floating point, got ",
              dtype_name(p.dtype()));
  ANVIL_CHECK(p.is_contiguous() && g.is_contiguous(), where,
              "parameter and gradient must be contiguous, got strides ", shape_str(p.strides()),
              " and ", shape_str(g.strides()));
  ANVIL_CHECK(g.sizes() == p.sizes() && g.dtype() == p.dtype(), where, "gradient ",
              shape_str(g.sizes()), " ", dtype_name(g.dtype()), " does not match parameter ",
              shape_str(p.sizes()), " ", dtype_name(p.dtype()));
  ANVIL_CHECK(g.device() == p.device(), where, "gradient on ", g.device(), " but parameter on ",
              p.device());
}

// Note [Multi-tensor optimizer calls]
// One table call per (device, dtype) list of the parameters, in order of first appearance (per
// parameter group, whose options differ): on the CPU (one list, f32) cpu.omp then runs exactly
// the per-tensor passes of before; on a GPU the whole list is one fused launch
// (kernels/cuda/optimizer_kernels.cu).
TableCall& call_for(std::vector<TableCall>& calls, OptimOp op, const Tensor& t) {
  for (auto& c : calls)
    if (c.problem.device == t.device() && c.problem.dtype == t.dtype()) return c;
  TableCall c;
  c.problem.op = op;
  c.problem.dtype = t.dtype();
  c.problem.device = t.device();
  calls.push_back(std::move(c));
  return calls.back();
}

void add_tensor(TableCall& call, const OptimTensor& t) {
  call.tensors.push_back(t);
  call.problem.tensors += 1;
  call.problem.numel += t.numel;
}

void run_calls(std::vector<TableCall>& calls, OptimizerArgs args) {
  for (auto& c : calls) {
    if (c.tensors.empty()) continue;
    args.problem = c.problem;
    args.tensors = c.tensors.data();
    optimizer_table(c.problem.op).run(args);
  }
}

}  // namespace anvil::optim::detail
