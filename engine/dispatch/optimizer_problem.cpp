// SPDX-License-Identifier: Apache-2.0
// Optimizer problem descriptors and tables (engine/dispatch/optimizer_problem.h).
#include "engine/dispatch/optimizer_problem.h"

#include <iterator>

#include "engine/core/error.h"
#include "engine/dispatch/registration.h"

namespace anvil {

const char* optim_op_name(OptimOp op) {
  switch (op) {
    case OptimOp::sgd:
      return "sgd_update";
    case OptimOp::adam:
      return "adam_update";
    case OptimOp::grad_norm:
      return "grad_norm";
    case OptimOp::grad_scale:
      return "grad_scale";
  }
  return "?";
}

std::string OptimizerProblem::key() const {
  return detail::str_cat(optim_op_name(op), ' ', dtype_name(dtype), ' ', device.str(), ' ', tensors,
                         ' ', numel, ' ', momentum, ' ', decoupled_decay);
}

std::string OptimizerProblem::repr() const {
  return detail::str_cat(optim_op_name(op), ' ', dtype_name(dtype), ' ', device.str(),
                         " tensors=", tensors, " numel=", numel,
                         op == OptimOp::sgd ? (momentum ? " momentum" : " plain") : "",
                         op == OptimOp::adam && decoupled_decay ? " decoupled-decay" : "");
}

double OptimizerProblem::bytes() const {
  // Elements touched per parameter element: reads + writes.
  double per = 0;
  switch (op) {
    case OptimOp::sgd:
      per = momentum ? 5 : 3;
      break;  // p r/w, g r (+ buf r/w)
    case OptimOp::adam:
      per = 7;
      break;  // p, m, v r/w, g r
    case OptimOp::grad_norm:
      per = 1;
      break;
    case OptimOp::grad_scale:
      per = 2;
      break;
  }
  return per * static_cast<double>(numel) * static_cast<double>(dtype_size(dtype));
}

// The four tables, created together in OptimOp's order (so the list of tables keeps it) and
// filled on first use.
OptimizerTable& optimizer_table(OptimOp op) {
  static OptimizerTable tables[] = {
      OptimizerTable("sgd_update", "it updates parameters in place"),
      OptimizerTable("adam_update", "it updates parameters and moments in place"),
      OptimizerTable("grad_norm",
                     "on a GPU it adds into its accumulator: each trial would add again"),
      OptimizerTable("grad_scale", "it scales gradients in place")};
  register_builtin_kernels();  // fills the tables on first use
  const auto i = static_cast<std::size_t>(op);
  ANVIL_CHECK(i < std::size(tables), "optimizer_table", "unknown op ", static_cast<int>(op));
  return tables[i];
}
OptimizerTable& sgd_update_table() { return optimizer_table(OptimOp::sgd); }
OptimizerTable& adam_update_table() { return optimizer_table(OptimOp::adam); }
OptimizerTable& grad_norm_table() { return optimizer_table(OptimOp::grad_norm); }
OptimizerTable& grad_scale_table() { return optimizer_table(OptimOp::grad_scale); }

}  // namespace anvil
