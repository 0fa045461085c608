// SPDX-License-Identifier: Apache-2.0
#pragma once
// The driver of each table that has one (harness/drivers/<op>_driver.cpp); harness/op_driver.cpp
// lists them in drivers(). Internal to harness/.
#include <memory>

#include "engine/dispatch/optimizer_problem.h"
#include "engine/dispatch/pool_problem.h"
#include "harness/op_driver.h"

namespace anvil::harness {

std::unique_ptr<OpDriver> make_gemm_driver();
std::unique_ptr<OpDriver> make_conv2d_driver();
std::unique_ptr<OpDriver> make_pool_driver(PoolKind kind);  // max_pool2d, avg_pool2d, adaptive
std::unique_ptr<OpDriver> make_batch_norm_driver();
std::unique_ptr<OpDriver> make_lstm_driver();
std::unique_ptr<OpDriver> make_elementwise_driver();
std::unique_ptr<OpDriver> make_reduce_driver();
std::unique_ptr<OpDriver> make_softmax_driver();
std::unique_ptr<OpDriver> make_embedding_driver();
std::unique_ptr<OpDriver> make_dropout_driver();
std::unique_ptr<OpDriver> make_optimizer_driver(OptimOp op);  // sgd_update, adam_update, ...

}  // namespace anvil::harness
