// SPDX-License-Identifier: Apache-2.0
// Elementwise problem descriptor (engine/dispatch/elementwise_problem.h).
#include "engine/dispatch/elementwise_problem.h"

#include "engine/core/error.h"
#include "engine/dispatch/registration.h"

namespace anvil {

const char* ew_name(EwOp op) {
  switch (op) {
    case EwOp::neg:
      return "neg";
    case EwOp::exp:
      return "exp";
    case EwOp::log:
      return "log";
    case EwOp::sqrt:
      return "sqrt";
    case EwOp::sigmoid:
      return "sigmoid";
    case EwOp::tanh:
      return "tanh";
    case EwOp::relu:
      return "relu";
    case EwOp::abs:
      return "abs";
    case EwOp::sign:
      return "sign";
    case EwOp::add:
      return "add";
    case EwOp::sub:
      return "sub";
    case EwOp::mul:
      return "mul";
    case EwOp::div:
      return "div";
    case EwOp::pow:
      return "pow";
    case EwOp::maximum:
      return "maximum";
    case EwOp::gt:
      return "gt";
    case EwOp::add_scalar:
      return "add_scalar";
    case EwOp::mul_scalar:
      return "mul_scalar";
    case EwOp::pow_scalar:
      return "pow_scalar";
    case EwOp::rsub_scalar:
      return "rsub_scalar";
    case EwOp::rdiv_scalar:
      return "rdiv_scalar";
    case EwOp::sigmoid_backward:
      return "sigmoid_backward";
    case EwOp::tanh_backward:
      return "tanh_backward";
    case EwOp::relu_backward:
      return "relu_backward";
    case EwOp::pow_scalar_backward:
      return "pow_scalar_backward";
  }
  return "?";
}

std::string ElementwiseProblem::key() const {
  return detail::str_cat(ew_name(op), ' ', dtype_name(dtype), ' ', device.str(), ' ', numel, ' ',
                         contiguous);
}

std::string ElementwiseProblem::repr() const {
  return detail::str_cat("elementwise ", ew_name(op), ' ', dtype_name(dtype), ' ', device.str(),
                         " numel=", numel, contiguous ? " contiguous" : " strided");
}

ElementwiseTable& elementwise_table() {
  static ElementwiseTable table(
      "elementwise", "its in-place forms (add_, mul_scalar_) would apply every trial to live data");
  register_builtin_kernels();  // fills the table on first use
  return table;
}

}  // namespace anvil
