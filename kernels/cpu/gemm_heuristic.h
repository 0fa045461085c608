// SPDX-License-Identifier: Apache-2.0
#pragma once
// The default-selection heuristic of the GEMM table: which CPU variant to prefer for a problem
// when nothing is forced or autotuned (Note [Variant selection], step 3). The rules and the
// measurements behind them are in Note [GEMM heuristic] (gemm_heuristic.cpp).
#include <string>

namespace anvil {
struct GemmProblem;
}

namespace anvil::kernels {

// The preferred CPU GEMM variant's name for `p` among those registered in gemm_table() that
// support it, or "" (no preference: the table's order decides). Pure function of the problem and
// the registered variants; exposed for tests and `anvil info`.
std::string gemm_heuristic_pick(const GemmProblem& p);

// gemm_table().set_heuristic(gemm_heuristic_pick). Call after the CPU variants are registered.
void install_gemm_heuristic();

}  // namespace anvil::kernels
