// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the `ref` entry of the "lstm" table: the per-step reference LSTM kernel,
// forward and backward, f32 and f64 (kernels/cpu/ref/lstm_ref.cpp, Note [LSTM ref variant]).
namespace anvil::kernels {
void register_lstm_ref();
}  // namespace anvil::kernels
