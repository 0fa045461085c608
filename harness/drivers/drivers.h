// SPDX-License-Identifier: Apache-2.0
#pragma once
// The driver of each table that has one (harness/drivers/<op>_driver.cpp); harness/op_driver.cpp
// lists them in drivers(). Internal to harness/.
#include <memory>

#include "engine/dispatch/pool_problem.h"
#include "harness/op_driver.h"

namespace anvil::harness {

std::unique_ptr<OpDriver> make_gemm_driver();
std::unique_ptr<OpDriver> make_conv2d_driver();
std::unique_ptr<OpDriver> make_pool_driver(PoolKind kind);  // max_pool2d, avg_pool2d, adaptive
std::unique_ptr<OpDriver> make_batch_norm_driver();
std::unique_ptr<OpDriver> make_lstm_driver();

}  // namespace anvil::harness
