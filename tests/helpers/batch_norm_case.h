// SPDX-License-Identifier: Apache-2.0
#pragma once
// Every pass of batch_norm2d on one input, shared by the CPU and GPU batch-norm variant tests
// (tests/test_pool_bn.cpp, tests/cuda/test_cuda_pool_bn.cpp): a training forward (momentum 0.1,
// eps 1e-5) updating copies of the running statistics, its backward, an inference forward with
// the given running statistics and (when asked) its backward. Runs whatever variant is forced.
#include "engine/core/tensor.h"

namespace anvil::test {

struct BnOutputs {
  Tensor y, mean, var, rm, rv, dx, dw, db, y_eval, dx_eval, dw_eval, db_eval;
};

// The inputs are copied to `dev` first; the outputs stay there.
BnOutputs batch_norm_passes(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rm0,
                            const Tensor& rv0, const Tensor& dy, Device dev, bool eval_backward);

}  // namespace anvil::test
