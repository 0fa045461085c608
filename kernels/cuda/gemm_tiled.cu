// SPDX-License-Identifier: Apache-2.0
// cuda.custom.gemm_tiled: a shared-memory tiled SGEMM, f32, row-major operands as in
// engine/dispatch/gemm_problem.h, all four transpose modes (one instantiation each), alpha/beta
// (beta_zero never reads C), strided batches, any M/N/K (bounds-checked tile loads and stores).
// Each 256-thread block computes a 64x64 tile of C, stepping through K in 16-wide slabs staged
// in shared memory; each thread keeps a 4x4 register tile. A research baseline next to cuBLAS,
// not a tuned kernel (no vector loads, no double buffering, no tensor cores).
#include <cuda_runtime.h>

#include <algorithm>

#include "engine/core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm_tiled.h"

namespace anvil::cuda {
namespace {

constexpr int kBM = static_cast<int>(kTiledGemmTileM);  // rows of C per block
constexpr int kBN = static_cast<int>(kTiledGemmTileN);  // columns of C per block
constexpr int kBK = 16;                                 // K slab staged per step
constexpr int kThreads = 256;                           // 16 x 16 threads
constexpr int kSide = 16;
constexpr int kTM = kBM / kSide, kTN = kBN / kSide;  // 4 x 4 outputs per thread
constexpr int kLoads = kBM * kBK / kThreads;         // tile elements each thread loads (4)
static_assert(kBM * kBK == kBN * kBK, "A and B slabs are loaded with the same thread map");
static_assert(kLoads * kThreads == kBM * kBK, "the slab must divide evenly over the threads");

// Thread (tx, ty) owns C rows i0 + ty + 16 r and columns j0 + tx + 16 c (r, c < 4): strided
// rather than a contiguous 4x4 block, so that a warp's shared-memory reads in the inner loop
// are broadcasts (A: 2 distinct addresses) or 16 consecutive words (B): no bank conflicts, and
// the stores of C are 16 consecutive floats per half-warp.
template <bool kTransA, bool kTransB>
__global__ void __launch_bounds__(kThreads) gemm_tiled_kernel(TiledGemmParams p) {
  // K-major slabs: as[l][i] = op(A)(i0 + i, l0 + l), bs[l][j] = op(B)(l0 + l, j0 + j). The
  // padding column spreads the stores of the modes that read memory along K (A in NN/NT, B in
  // NT/TT) over the banks.
  __shared__ float as[kBK][kBM + 1];
  __shared__ float bs[kBK][kBN + 1];
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % kSide, ty = tid / kSide;
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.y) * kBM;
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * kBN;

  for (std::int64_t bi = blockIdx.z; bi < p.batch; bi += gridDim.z) {
    const float* A = p.a + bi * p.stride_a;
    const float* B = p.b + bi * p.stride_b;
    float* C = p.c + bi * p.stride_c;
    float acc[kTM][kTN];
#pragma unroll
    for (int r = 0; r < kTM; ++r)
#pragma unroll
      for (int c = 0; c < kTN; ++c) acc[r][c] = 0.0f;

    for (std::int64_t l0 = 0; l0 < p.k; l0 += kBK) {
      // The thread -> element map follows the stored layout, so that neighbouring threads read
      // neighbouring addresses (coalesced) whichever way the operand is stored.
#pragma unroll
      for (int e = 0; e < kLoads; ++e) {
        const int idx = tid + e * kThreads;
        const int i = kTransA ? idx % kBM : idx / kBK;  // A stored [K,M]: contiguous along M
        const int l = kTransA ? idx / kBM : idx % kBK;  // A stored [M,K]: contiguous along K
        const std::int64_t gi = i0 + i, gl = l0 + l;
        float v = 0.0f;
        if (gi < p.m && gl < p.k) v = kTransA ? A[gl * p.lda + gi] : A[gi * p.lda + gl];
        as[l][i] = v;
      }
#pragma unroll
      for (int e = 0; e < kLoads; ++e) {
        const int idx = tid + e * kThreads;
        const int j = kTransB ? idx / kBK : idx % kBN;  // B stored [N,K]: contiguous along K
        const int l = kTransB ? idx % kBK : idx / kBN;  // B stored [K,N]: contiguous along N
        const std::int64_t gj = j0 + j, gl = l0 + l;
        float v = 0.0f;
        if (gj < p.n && gl < p.k) v = kTransB ? B[gj * p.ldb + gl] : B[gl * p.ldb + gj];
        bs[l][j] = v;
      }
      __syncthreads();
#pragma unroll
      for (int l = 0; l < kBK; ++l) {
        float a[kTM], b[kTN];
#pragma unroll
        for (int r = 0; r < kTM; ++r) a[r] = as[l][ty + kSide * r];
#pragma unroll
        for (int c = 0; c < kTN; ++c) b[c] = bs[l][tx + kSide * c];
#pragma unroll
        for (int r = 0; r < kTM; ++r)
#pragma unroll
          for (int c = 0; c < kTN; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
      }
      __syncthreads();  // the slab is overwritten by the next step
    }

#pragma unroll
    for (int r = 0; r < kTM; ++r) {
      const std::int64_t gi = i0 + ty + kSide * r;
      if (gi >= p.m) continue;
#pragma unroll
      for (int c = 0; c < kTN; ++c) {
        const std::int64_t gj = j0 + tx + kSide * c;
        if (gj >= p.n) continue;
        float* out = C + gi * p.ldc + gj;
        // beta == 0: C is output only (BLAS contract), so NaN/Inf in C must not propagate.
        const float old = p.beta_zero ? 0.0f : p.beta * *out;
        *out = p.alpha * acc[r][c] + old;
      }
    }
  }
}

}  // namespace

void launch_gemm_tiled(cudaStream_t stream, const TiledGemmParams& p) {
  ANVIL_CHECK(p.m >= 0 && p.n >= 0 && p.k >= 0 && p.batch >= 1, "cuda.custom.gemm_tiled",
              "bad sizes M=", p.m, " N=", p.n, " K=", p.k, " batch=", p.batch);
  if (p.m == 0 || p.n == 0) return;  // a grid dimension of 0 is a launch error
  ANVIL_CHECK(tiled_gemm_grid_fits(p.m, p.n), "cuda.custom.gemm_tiled", "M=", p.m, " N=", p.n,
              " exceed the launch grid (at most 65535 tiles of ", kBM, " rows)");
  const dim3 grid(static_cast<unsigned>((p.n + kBN - 1) / kBN),
                  static_cast<unsigned>((p.m + kBM - 1) / kBM),
                  static_cast<unsigned>(std::min<std::int64_t>(p.batch, 65535)));
  const dim3 block(kThreads);
  if (!p.trans_a && !p.trans_b)
    gemm_tiled_kernel<false, false><<<grid, block, 0, stream>>>(p);
  else if (!p.trans_a && p.trans_b)
    gemm_tiled_kernel<false, true><<<grid, block, 0, stream>>>(p);
  else if (p.trans_a && !p.trans_b)
    gemm_tiled_kernel<true, false><<<grid, block, 0, stream>>>(p);
  else
    gemm_tiled_kernel<true, true><<<grid, block, 0, stream>>>(p);
  // Launch errors (bad configuration, no kernel image for this GPU) are reported here; faults
  // during execution surface at the next synchronising call on the stream.
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace anvil::cuda
