// SPDX-License-Identifier: Apache-2.0
#pragma once
// OpProblem: a problem of any table that a model's layers run (GEMM, convolution, pooling, batch
// norm, LSTM), as one value. nn::Module::problems() lists them (engine/nn/module.h); consumers
// switch on the type with std::visit or std::get_if, never on a string.
#include <variant>

#include "engine/dispatch/batch_norm_problem.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/lstm_problem.h"
#include "engine/dispatch/pool_problem.h"

namespace anvil {

using OpProblem =
    std::variant<GemmProblem, ConvProblem, PoolProblem, BatchNormProblem, LstmProblem>;

// The variant-table (op) name of the problem: "gemm", "conv2d", "max_pool2d", "avg_pool2d",
// "adaptive_avg_pool2d", "batch_norm2d" or "lstm".
const char* op_name(const OpProblem& p);

}  // namespace anvil
