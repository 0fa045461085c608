// SPDX-License-Identifier: Apache-2.0
#pragma once
// The default-selection heuristic of the conv2d table: which CPU variant to prefer for a problem
// when nothing is forced or autotuned (Note [Variant selection], step 3). Rules and the
// measurements behind them: Note [conv2d heuristic] (conv_heuristic.cpp), docs/kernels/conv.md.
#include <string>

namespace anvil {
struct ConvProblem;
}

namespace anvil::kernels {

// The preferred variant's name for `p` among those registered in conv_table(), or "" (no
// preference: the table's order decides). Pure function of the problem and the registered names.
std::string conv_heuristic_pick(const ConvProblem& p);

// conv_table().set_heuristic(conv_heuristic_pick). Call after the conv variants are registered.
void install_conv_heuristic();

}  // namespace anvil::kernels
