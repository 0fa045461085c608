// SPDX-License-Identifier: Apache-2.0
#pragma once
// The table problems the pointwise ops build (engine/ops/elementwise.cpp, reduce.cpp,
// softmax.cpp), rebuilt from their operands so that the variant harness
// (tests/helpers/variant_harness.h) can ask each variant's supports() before forcing it, on the
// CPU and the GPU alike. The reduce and softmax ones describe the op's main call (an op may make
// more; a variant that then declines one fails with the forced-variant error, never silently).
#include "engine/core/tensor.h"
#include "engine/dispatch/elementwise_problem.h"
#include "engine/dispatch/reduce_problem.h"
#include "engine/dispatch/softmax_problem.h"

namespace anvil::test {

// ops::unary (b null) or ops::binary on a and b, on a's device.
ElementwiseProblem elementwise_problem_of(EwOp op, const Tensor& a, const Tensor* b);
// A reduction of all of x (x's dtype and device).
ReduceProblem reduce_problem_of(ReduceOp op, const Tensor& x);
// Rows of x's last dim (x's dtype and device).
SoftmaxProblem softmax_problem_of(SoftmaxOp op, const Tensor& x, DType index_dtype = DType::i64);

}  // namespace anvil::test
