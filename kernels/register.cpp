// register_builtin_kernels(): the one place that knows every built-in kernel family.
#include "kernels/register.h"

#include <mutex>

#include "kernels/cpu/omp/omp_kernels.h"
#include "kernels/cpu/ref/ref_kernels.h"

namespace anvil {

void register_builtin_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    kernels::register_gemm_ref();
    kernels::register_elementwise_ref();
    kernels::register_elementwise_omp();
  });
}

}  // namespace anvil
