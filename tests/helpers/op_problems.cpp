// SPDX-License-Identifier: Apache-2.0
// The pointwise ops' table problems for the tests (tests/helpers/op_problems.h).
#include "helpers/op_problems.h"

#include "engine/core/views.h"

namespace anvil::test {

ElementwiseProblem elementwise_problem_of(EwOp op, const Tensor& a, const Tensor* b) {
  const Shape shape = b ? raw::broadcast_shapes(a.sizes(), b->sizes(), "test") : a.sizes();
  ElementwiseProblem p;
  p.op = op;
  p.dtype = a.dtype();
  p.device = a.device();
  p.numel = 1;
  for (auto s : shape) p.numel *= s;
  p.contiguous = a.is_contiguous() && a.sizes() == shape &&
                 (!b || (b->is_contiguous() && b->sizes() == shape));
  return p;
}

ReduceProblem reduce_problem_of(ReduceOp op, const Tensor& x) {
  ReduceProblem p;
  p.op = op;
  p.dtype = x.dtype();
  p.device = x.device();
  p.reduce = x.numel();
  return p;
}

SoftmaxProblem softmax_problem_of(SoftmaxOp op, const Tensor& x, DType index_dtype) {
  SoftmaxProblem p;
  p.op = op;
  p.dtype = x.dtype();
  p.index_dtype = index_dtype;
  p.device = x.device();
  p.cols = x.dim() > 0 ? x.sizes().back() : 1;
  p.rows = p.cols > 0 ? x.numel() / p.cols : 0;
  return p;
}

}  // namespace anvil::test
