// SPDX-License-Identifier: Apache-2.0
#pragma once
// Internal boundary between the generic `cpu.eigen` TU (gemm_eigen.cpp) and the TU compiled
// with AVX-512 flags (gemm_eigen_avx512.cpp). Raw pointers and integers only: no Eigen, no anvil
// and no standard-library types cross it (Note [Eigen AVX-512 translation unit]).
#include <cstdint>

namespace anvil::kernels::eigen_avx512 {

// One row-major f32 GEMM: C[M,N] = alpha * op(A) * op(B) (+ beta * C unless beta_zero).
// Must only be called on a CPU with AVX-512 F/DQ/BW/VL and FMA.
void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, bool beta_zero,
           float beta, float* c, std::int64_t ldc);

// Eigen::setNbThreads(n). Same CPU requirement (the TU may use AVX-512 anywhere).
void set_num_threads(int n);

}  // namespace anvil::kernels::eigen_avx512
