// SPDX-License-Identifier: Apache-2.0
#pragma once
// OpProblem: a problem of any variant table, as one value: the tables a model's layers run (GEMM,
// convolution, pooling, batch norm, LSTM), which nn::Module::problems() lists
// (engine/nn/module.h), and the pointwise, reduction, softmax, embedding, dropout and optimizer
// tables, which the op drivers (harness/op_driver.h) and problem descriptors also name. One
// OptimizerProblem type serves the four optimizer tables (its `op` says which). Consumers switch
// on the type with std::visit or std::get_if, never on a string.
#include <variant>

#include "engine/dispatch/batch_norm_problem.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/dropout_problem.h"
#include "engine/dispatch/elementwise_problem.h"
#include "engine/dispatch/embedding_problem.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/lstm_problem.h"
#include "engine/dispatch/optimizer_problem.h"
#include "engine/dispatch/pool_problem.h"
#include "engine/dispatch/reduce_problem.h"
#include "engine/dispatch/softmax_problem.h"

namespace anvil {

using OpProblem = std::variant<GemmProblem, ConvProblem, PoolProblem, BatchNormProblem, LstmProblem,
                               ElementwiseProblem, ReduceProblem, SoftmaxProblem, EmbeddingProblem,
                               DropoutProblem, OptimizerProblem>;

// The variant-table (op) name of the problem: "gemm", "conv2d", "max_pool2d", "avg_pool2d",
// "adaptive_avg_pool2d", "batch_norm2d", "lstm", "elementwise", "reduce", "softmax", "embedding",
// "dropout", "sgd_update", "adam_update", "grad_norm" or "grad_scale".
const char* op_name(const OpProblem& p);

}  // namespace anvil
