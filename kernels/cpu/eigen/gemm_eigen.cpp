// SPDX-License-Identifier: Apache-2.0
// GEMM `cpu.eigen`: registration, CPU check, batching and Eigen's thread knob. f32, all four
// transpose modes, alpha/beta, batched by a loop over matrices; row-major operands as in
// engine/dispatch/gemm_problem.h. The arithmetic is in gemm_eigen_avx512.cpp, which is compiled
// with AVX-512 flags; this file is baseline code so that it can refuse an older CPU safely
// (Note [Eigen AVX-512 translation unit]).
#include "kernels/cpu/eigen/gemm_eigen.h"

#include "engine/core/config.h"
#include "engine/dispatch/gemm_problem.h"
#include "kernels/cpu/eigen/gemm_eigen_kernel.h"

namespace anvil::kernels {
namespace {

// The kernel TU needs exactly the flags it was compiled with (-mavx512f/dq/bw/vl, -mfma).
bool cpu_has_avx512() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                         __builtin_cpu_supports("fma");
  return ok;
}

Support supports_eigen(const GemmProblem& p) {
  if (p.dtype != DType::f32) return Support::no("cpu.eigen handles f32 only");
  if (!cpu_has_avx512())
    return Support::no(
        "cpu.eigen is built for AVX-512 (F, DQ, BW, VL) and FMA; this CPU lacks them");
  return Support::yes();
}

void gemm_eigen(const GemmArgs& args) {
  const GemmProblem& p = args.problem;
  p.validate("cpu.eigen");
  const auto* a = static_cast<const float*>(args.a);
  const auto* b = static_cast<const float*>(args.b);
  auto* c = static_cast<float*>(args.c);
  for (std::int64_t i = 0; i < p.batch; ++i)
    eigen_avx512::sgemm(p.trans_a, p.trans_b, p.m, p.n, p.k, static_cast<float>(args.alpha),
                        a + i * p.stride_a, p.lda, b + i * p.stride_b, p.ldb, p.beta_zero,
                        static_cast<float>(args.beta), c + i * p.stride_c, p.ldc);
}

}  // namespace

void register_gemm_eigen() {
  add_library_version("Eigen",
                      ANVIL_EIGEN_VERSION);  // from find_package (kernels/cpu/eigen/CMakeLists.txt)
  // Eigen (built with OpenMP) sizes its GEMM thread team with Eigen::setNbThreads; follow the
  // one thread knob. Only on a CPU that may run the AVX-512 TU at all.
  if (cpu_has_avx512()) add_thread_setter([](int n) { eigen_avx512::set_num_threads(n); });
  gemm_table().add({
      .name = "cpu.eigen",
      .supports = supports_eigen,
      .fn = gemm_eigen,
      .description = "Eigen 3.4 product over row-major Maps, AVX-512 code, batched by a loop",
  });
}

}  // namespace anvil::kernels
