// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the oneDNN 2.6 LSTM variant `cpu.onednn` (lstm_forward / lstm_backward).
namespace anvil::kernels {
void register_lstm_onednn();
}  // namespace anvil::kernels
