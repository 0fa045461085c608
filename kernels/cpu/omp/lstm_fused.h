// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the `cpu.fused` LSTM variant (kernels/cpu/omp/lstm_fused.cpp).
namespace anvil::kernels {
void register_lstm_fused();
}  // namespace anvil::kernels
