// SPDX-License-Identifier: Apache-2.0
#pragma once
// Tensor-level GEMM without autograd: maps 2-D (or 3-D batched) tensors and views onto a
// GemmProblem and runs the selected `gemm` variant.
//
// Note [Views as transpose modes]
// A 2-D view whose rows are dense (stride[1] == 1) is passed as it is, with ld = stride[0]; a
// view whose columns are dense (stride[0] == 1, e.g. W.t()) is passed as the transpose of the
// stored matrix, flipping the transpose flag, so x.matmul(W.t()) runs as an NT GEMM with no
// copy. Anything else is made contiguous first.
#include "engine/core/tensor.h"
#include "engine/dispatch/gemm_problem.h"

namespace anvil::ops {

// c = alpha * op(a) @ op(b) + beta * c, where op(x) = x or x^T (last two dims).
// a, b, c are 2-D, or 3-D with equal batch sizes; c must have dense rows. beta == 0 ignores c's
// old values.
void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
          double alpha = 1.0, double beta = 0.0);
// A new tensor op(a) @ op(b).
Tensor mm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b);

// The GemmProblem a call gemm(a, trans_a, b, trans_b, c, ., beta) would run (for benchmarks and
// tests that want to see the mapping).
GemmProblem gemm_problem_for(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                             const Tensor& c, double beta);

}  // namespace anvil::ops
