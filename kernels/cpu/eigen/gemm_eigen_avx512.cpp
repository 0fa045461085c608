// SPDX-License-Identifier: Apache-2.0
// GEMM `cpu.eigen` kernel body: Eigen 3.4 matrix product over row-major Maps, f32, one matrix.
// Compiled with -mavx512f -mavx512dq -mavx512bw -mavx512vl -mfma (CMakeLists.txt); see
// Note [Eigen AVX-512 translation unit] before adding anything here.
//
// Note [Eigen AVX-512 translation unit]
// Eigen picks its SIMD width at compile time; with the project's baseline flags it emits SSE2
// code and reaches a fraction of the 512-bit FMA peak (TOOLCHAIN.md: ≈150 GFLOP/s only with
// AVX-512 code generation; with these flags it does 97-101 GFLOP/s on the DLBench shape on the
// dev machine's Zen 4, 85 % of its 117 peak). So this file alone is built with AVX-512 flags (never
// -march=native: the library must run on the CPU that loads it, not the one that built it).
// Consequences:
//  * Nothing here may run before the caller has checked the CPU (gemm_eigen.cpp's supports()
//    and registration use __builtin_cpu_supports("avx512f") in baseline code).
//  * Every inline function instantiated here is AVX-512 code, and the linker keeps ONE copy of
//    each inline/template symbol per library. If this TU instantiated std::string, std::vector,
//    anvil helpers..., another TU's call could be bound to this AVX-512 copy and crash an older
//    CPU. Hence: only Eigen headers and <cstdint>, raw pointers in, and only this folder includes
//    Eigen, so Eigen's own templates are instantiated here only. Check after editing:
//    `nm -C gemm_eigen_avx512.cpp.o | grep ' [WVu] '` must list Eigen:: symbols only (plus
//    DW.ref.__gxx_personality_v0, a data word).
#include "kernels/cpu/eigen/gemm_eigen_kernel.h"

#include <Eigen/Core>

namespace anvil::kernels::eigen_avx512 {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;  // row-major: distance between rows = leading dimension
using ConstMap = Eigen::Map<const RowMatrix, Eigen::Unaligned, Stride>;
using MutMap = Eigen::Map<RowMatrix, Eigen::Unaligned, Stride>;

// C = alpha * opA * opB (+ beta * C). Eigen evaluates `noalias()` products straight into C
// with its blocked GEBP kernel; a transposed Map is just a different storage-order view, so no
// operand is copied outside Eigen's own packing.
template <typename OpA, typename OpB>
void product(const OpA& op_a, const OpB& op_b, float alpha, bool beta_zero, float beta, MutMap& c) {
  if (beta_zero) {
    // Assignment, not `c *= 0; c += ...`: C is write-only, so NaN/Inf garbage in it must vanish.
    c.noalias() = alpha * (op_a * op_b);
  } else {
    if (beta != 1.0f) c *= beta;
    c.noalias() += alpha * (op_a * op_b);
  }
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, bool beta_zero,
           float beta, float* c, std::int64_t ldc) {
  // Stored shapes: A is [M,K] or, transposed, [K,M]; B is [K,N] or [N,K]; C is [M,N].
  const ConstMap a_map(a, trans_a ? k : m, trans_a ? m : k, Stride(lda));
  const ConstMap b_map(b, trans_b ? n : k, trans_b ? k : n, Stride(ldb));
  MutMap c_map(c, m, n, Stride(ldc));
  if (!trans_a && !trans_b)
    product(a_map, b_map, alpha, beta_zero, beta, c_map);
  else if (!trans_a && trans_b)
    product(a_map, b_map.transpose(), alpha, beta_zero, beta, c_map);
  else if (trans_a && !trans_b)
    product(a_map.transpose(), b_map, alpha, beta_zero, beta, c_map);
  else
    product(a_map.transpose(), b_map.transpose(), alpha, beta_zero, beta, c_map);
}

void set_num_threads(int n) { Eigen::setNbThreads(n); }

}  // namespace anvil::kernels::eigen_avx512
