// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the `ref` entry of the "lstm" table. Its computation is a composition of
// differentiable ops that lives in engine/autograd/functions_recurrent.cpp (Note [LSTM ref
// variant]); the table entry exists so that `ref` can be listed, forced and reasoned about
// like every other variant.
namespace anvil::kernels {
void register_lstm_ref();
}  // namespace anvil::kernels
