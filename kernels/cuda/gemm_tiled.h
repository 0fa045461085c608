// SPDX-License-Identifier: Apache-2.0
#pragma once
// cuda.custom.gemm_tiled: anvil's own shared-memory tiled SGEMM (gemm_tiled.cu), launched by
// the variant in gemm_cublas.cpp. Plain parameters rather than GemmProblem, because the .cu
// file is C++17 and may not include engine/dispatch headers (CMakeLists.txt).
// C++17-clean (usable from .cu files).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace anvil::cuda {

// Row-major, as in engine/dispatch/gemm_problem.h: C[M,N] = alpha op(A) op(B) + beta C for
// `batch` matrices; op(A) is A[M,K] (lda >= K) or A stored [K,M] (trans_a, lda >= M); op(B) is
// B[K,N] (ldb >= N) or B stored [N,K] (trans_b, ldb >= K); ldc >= N. beta_zero: C is not read.
struct TiledGemmParams {
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  std::int64_t batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  const float* a = nullptr;
  const float* b = nullptr;
  float* c = nullptr;
  float alpha = 1.0f, beta = 0.0f;
  bool beta_zero = true;
};

// The block tile (kTileM x kTileN outputs per thread block): M and N are limited by the grid
// (tiles_fit), nothing else.
inline constexpr std::int64_t kTiledGemmTileM = 64, kTiledGemmTileN = 64;

// True when the grid of the launch fits CUDA's limits (65535 row tiles: M <= 4194240).
inline bool tiled_gemm_grid_fits(std::int64_t m, std::int64_t n) {
  return (m + kTiledGemmTileM - 1) / kTiledGemmTileM <= 65535 &&
         (n + kTiledGemmTileN - 1) / kTiledGemmTileN <= 2147483647;
}

// Enqueues the kernel on `stream` (not waited for); throws anvil::Error on a launch failure.
// M, N == 0 launch nothing; K == 0 gives C = beta C (or 0).
void launch_gemm_tiled(cudaStream_t stream, const TiledGemmParams& p);

}  // namespace anvil::cuda
