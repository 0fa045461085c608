// SPDX-License-Identifier: Apache-2.0
#pragma once
// The GEMM problem descriptor and its variant table.
//
// Row-major, BLAS-like: C[M,N] = alpha * op(A) * op(B) + beta * C, for `batch` independent
// matrices spaced stride_a/stride_b/stride_c elements apart.
//   op(A) is A[M,K] (lda >= K) or, with trans_a, A stored as [K,M] (lda >= M);
//   op(B) is B[K,N] (ldb >= N) or, with trans_b, B stored as [N,K] (ldb >= K);
//   C is [M,N] with ldc >= N. With beta == 0, C is not read (NaNs in C do not propagate).
// Variants: ref (f32/f64), cpu.eigen, cpu.onednn, cpu.onednn.matmul, cpu.blocked, cuda.*.
#include <cstdint>
#include <string>
#include <tuple>

#include "engine/core/device.h"
#include "engine/core/dtype.h"
#include "engine/dispatch/variant_table.h"

namespace anvil {

struct GemmProblem {
  DType dtype = DType::f32;
  Device device = Device::cpu();
  bool trans_a = false;
  bool trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  std::int64_t batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // between batch matrices
  bool beta_zero = true;                                  // beta == 0: C is write-only

  // Fills lda/ldb/ldc (tight) and batch strides for dense operands.
  static GemmProblem dense(std::int64_t m, std::int64_t n, std::int64_t k, bool trans_a,
                           bool trans_b, DType dtype = DType::f32, std::int64_t batch = 1);

  DeviceType device_type() const { return device.type; }
  // Every member (Note [Problem fields], engine/dispatch/problem_fields.h).
  bool operator==(const GemmProblem&) const = default;
  auto fields() const {
    return std::tie(dtype, device, trans_a, trans_b, m, n, k, lda, ldb, ldc, batch, stride_a,
                    stride_b, stride_c, beta_zero);
  }
  // "NN", "NT", "TN" or "TT" (A's mode first).
  std::string mode() const;
  std::string key() const;   // every field that can change the winner
  std::string repr() const;  // "gemm f32 cpu NT M=64 N=2048 K=26752 lda=... batch=1 beta=0"
  double flops() const { return 2.0 * static_cast<double>(m) * n * k * batch; }
  // Bytes of A, B and C touched once (C twice when beta != 0).
  double bytes() const;
  // Throws anvil::Error naming `where` when leading dimensions or sizes are inconsistent.
  void validate(const char* where) const;
};

struct GemmArgs {
  GemmProblem problem;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  double alpha = 1.0;
  double beta = 0.0;
};

using GemmTable = VariantTable<GemmProblem, GemmArgs>;
// The process-wide GEMM table (filled by register_builtin_kernels()).
GemmTable& gemm_table();

}  // namespace anvil
