// GEMM default-selection heuristic (kernels/cpu/gemm_heuristic.h). PLACEHOLDER, rules follow measurements.
#include "kernels/cpu/gemm_heuristic.h"

#include "engine/dispatch/gemm_problem.h"

namespace anvil::kernels {

std::string gemm_heuristic_pick(const GemmProblem& p) {
  (void)p;
  return "";
}

void install_gemm_heuristic() { gemm_table().set_heuristic(gemm_heuristic_pick); }

}  // namespace anvil::kernels
