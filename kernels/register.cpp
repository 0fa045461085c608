// register_builtin_kernels(): the one place that knows every built-in kernel family.
#include "kernels/register.h"

#include <mutex>

#include "kernels/cpu/blocked/gemm_blocked.h"
#include "kernels/cpu/eigen/gemm_eigen.h"
#include "kernels/cpu/gemm_heuristic.h"
#include "kernels/cpu/omp/omp_kernels.h"
#include "kernels/cpu/onednn/gemm_onednn.h"
#include "kernels/cpu/ref/ref_kernels.h"

namespace anvil {

void register_builtin_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    // GEMM: own blocked kernel, Eigen, oneDNN (sgemm and matmul), the reference; then the
    // per-shape default choice (Note [GEMM heuristic]).
    kernels::register_gemm_ref();
    kernels::register_gemm_blocked();
    kernels::register_gemm_eigen();
    kernels::register_gemm_onednn();
    kernels::install_gemm_heuristic();
    // Pointwise ops.
    kernels::register_elementwise_ref();
    kernels::register_elementwise_omp();
  });
}

}  // namespace anvil
