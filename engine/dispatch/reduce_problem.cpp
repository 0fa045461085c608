// SPDX-License-Identifier: Apache-2.0
// Reduction problem descriptor (engine/dispatch/reduce_problem.h).
#include "engine/dispatch/reduce_problem.h"

#include "engine/core/error.h"
#include "engine/dispatch/registration.h"

namespace anvil {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::max:
      return "max";
  }
  return "?";
}

std::string ReduceProblem::key() const {
  return detail::str_cat(reduce_op_name(op), ' ', dtype_name(dtype), ' ', device.str(), ' ', outer,
                         'x', reduce, 'x', inner);
}

std::string ReduceProblem::repr() const {
  return detail::str_cat("reduce ", reduce_op_name(op), ' ', dtype_name(dtype), ' ', device.str(),
                         " [outer=", outer, ", reduce=", reduce, ", inner=", inner, "]");
}

ReduceTable& reduce_table() {
  static ReduceTable table("reduce");
  register_builtin_kernels();  // fills the table on first use
  return table;
}

Support reduce_basic_support(const ReduceProblem& p) {
  if (!is_floating(p.dtype))
    return Support::no(detail::str_cat("dtype ", dtype_name(p.dtype), " (f32/f64 only)"));
  if (p.op == ReduceOp::max && p.reduce <= 0) return Support::no("max over an empty extent");
  return Support::yes();
}

}  // namespace anvil
