// SPDX-License-Identifier: Apache-2.0
#pragma once
// The default-selection heuristic of the lstm table: which CPU variant to prefer for a problem
// when nothing is forced or autotuned (Note [Variant selection], step 3). Rules and the
// measurements behind them: Note [LSTM heuristic] (lstm_heuristic.cpp).
#include <string>

namespace anvil {
struct LstmProblem;
}

namespace anvil::kernels {

// The preferred variant's name for `p` among those registered in lstm_table(), or "" (no
// preference: the table's order decides). Depends on the problem, the registered names and the
// OpenMP thread count at the call.
std::string lstm_heuristic_pick(const LstmProblem& p);

// lstm_table().set_heuristic(lstm_heuristic_pick). Call after the lstm variants are registered.
void install_lstm_heuristic();

}  // namespace anvil::kernels
