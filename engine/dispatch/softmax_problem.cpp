// SPDX-License-Identifier: Apache-2.0
// Softmax-family problem descriptor (engine/dispatch/softmax_problem.h).
#include "engine/dispatch/softmax_problem.h"

#include "engine/core/error.h"
#include "engine/dispatch/registration.h"

namespace anvil {

const char* softmax_op_name(SoftmaxOp op) {
  switch (op) {
    case SoftmaxOp::softmax:
      return "softmax";
    case SoftmaxOp::log_softmax:
      return "log_softmax";
    case SoftmaxOp::softmax_backward:
      return "softmax_backward";
    case SoftmaxOp::log_softmax_backward:
      return "log_softmax_backward";
    case SoftmaxOp::cross_entropy_forward:
      return "cross_entropy_forward";
    case SoftmaxOp::cross_entropy_backward:
      return "cross_entropy_backward";
    case SoftmaxOp::cross_entropy_forward_grad:
      return "cross_entropy_forward_grad";
  }
  return "?";
}

std::string SoftmaxProblem::key() const {
  return detail::str_cat(softmax_op_name(op), ' ', dtype_name(dtype), ' ',
                         softmax_is_cross_entropy(op) ? dtype_name(index_dtype) : "-", ' ',
                         device.str(), ' ', rows, 'x', cols);
}

std::string SoftmaxProblem::repr() const {
  return detail::str_cat(softmax_op_name(op), ' ', dtype_name(dtype),
                         softmax_is_cross_entropy(op) ? " target " : "",
                         softmax_is_cross_entropy(op) ? dtype_name(index_dtype) : "", ' ',
                         device.str(), " [rows=", rows, ", cols=", cols, "]");
}

SoftmaxTable& softmax_table() {
  static SoftmaxTable table("softmax");
  register_builtin_kernels();  // fills the table on first use
  return table;
}

Support softmax_basic_support(const SoftmaxProblem& p) {
  if (!is_floating(p.dtype))
    return Support::no(detail::str_cat("dtype ", dtype_name(p.dtype), " (f32/f64 only)"));
  if (softmax_is_cross_entropy(p.op) && p.index_dtype != DType::i32 && p.index_dtype != DType::i64)
    return Support::no(
        detail::str_cat("class ids of dtype ", dtype_name(p.index_dtype), " (i32/i64 only)"));
  if (p.op == SoftmaxOp::cross_entropy_forward_grad && p.device.type != DeviceType::cpu)
    return Support::no(
        "cross_entropy_forward_grad has CPU kernels only (other devices compose "
        "linear and cross_entropy)");
  return Support::yes();
}

}  // namespace anvil
