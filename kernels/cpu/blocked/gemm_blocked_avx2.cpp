// SPDX-License-Identifier: Apache-2.0
// GEMM `cpu.blocked`, AVX2+FMA part (CPUs without AVX-512): the 6x16 f32 micro-kernel, the
// macro-kernel over one packed A block x one packed B block, and plain packing loops.
// Compiled with -mavx2 -mfma: see Note [ISA translation units] (blocked_kernels.h).
// Row-major C; A micro-panels [KC][6] and B micro-panels [KC][16], both zero padded.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/blocked/blocked_kernels.h"

namespace anvil::kernels::blocked {
namespace {

using i64 = std::int64_t;

// Note [AVX2 register tile 6x16]
// 16 ymm registers: 6 x 2 = 12 accumulators + 2 vectors of B + 1 broadcast of A = 15. Twelve
// independent chains cover two FMA pipes x latency 4-5 on Haswell..Zen. This path exists so that
// cpu.blocked runs on any x86-64 CPU with AVX2; it is the fallback, so edges take the simple road
// (zero-padded panels, full tile into a scratch tile, copy of the valid part) and packing is
// scalar. Block sizes are those of Note [Blocking] in gemm_blocked_avx512.cpp (the A micro-panel,
// 6 x 384 x 4 B = 9 KiB, fits any L1). Measured with the AVX-512 path forced off, on a host whose
// 256-bit FMA peak is 117 GFLOP/s: 91-96 GFLOP/s on M=1022 N=1024 K=6000, all four modes.
constexpr int kMR = 6;
constexpr int kNR = 16;
constexpr int kMC = 2048;
constexpr int kKC = 384;
constexpr int kNC = 256;

__attribute__((always_inline)) inline void tile(i64 kc, const float* __restrict ap,
                                                const float* __restrict bp, float* c, i64 ldc,
                                                float alpha, float beta, bool read_c) {
  __m256 acc[kMR][2];
#pragma GCC unroll 8
  for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
#pragma GCC unroll 2
  for (i64 l = 0; l < kc; ++l) {
    const __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
      const __m256 a = _mm256_broadcast_ss(ap + r);
      acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
    }
    ap += kMR;
    bp += kNR;
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 8
  for (int r = 0; r < kMR; ++r) {
    float* cr = c + r * ldc;
    __m256 x0 = _mm256_mul_ps(acc[r][0], va), x1 = _mm256_mul_ps(acc[r][1], va);
    if (read_c) {  // beta == 0 must not read C (NaN there must not leak)
      x0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr), x0);
      x1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr + 8), x1);
    }
    _mm256_storeu_ps(cr, x0);
    _mm256_storeu_ps(cr + 8, x1);
  }
}

void pack_b(const float* b, i64 ldb, bool trans, i64 kc, i64 nc, float* dst);

void macro(i64 mc, i64 nc, i64 kc, const float* ap, float* bp, const float* b_src, i64 ldb,
           bool b_trans, float* c, i64 ldc, float alpha, float beta, bool read_c) {
  if (b_src != nullptr) pack_b(b_src, ldb, b_trans, kc, nc, bp);  // a separate pass here
  alignas(32) float scratch[kMR * kNR];
  for (i64 i = 0; i < mc; i += kMR) {
    const i64 mr = (mc - i < kMR) ? mc - i : kMR;
    for (i64 j = 0; j < nc; j += kNR) {
      const i64 w = (nc - j < kNR) ? nc - j : kNR;
      float* cij = c + i * ldc + j;
      if (mr == kMR && w == kNR) {
        tile(kc, ap + i * kc, bp + j * kc, cij, ldc, alpha, beta, read_c);
        continue;
      }
      // Edge: the padded rows/columns are zeros; only the valid part reaches C.
      tile(kc, ap + i * kc, bp + j * kc, scratch, kNR, 1.0f, 0.0f, false);
      for (i64 r = 0; r < mr; ++r)
        for (i64 q = 0; q < w; ++q) {
          float* dst = cij + r * ldc + q;
          const float x = alpha * scratch[r * kNR + q];
          *dst = read_c ? x + beta * *dst : x;
        }
    }
  }
}

void pack_a(const float* a, i64 lda, bool trans, i64 mc, i64 kc, float* dst) {
  for (i64 i = 0; i < mc; i += kMR) {
    const i64 mr = (mc - i < kMR) ? mc - i : kMR;
    float* d = dst + i * kc;
    if (trans) {
      const float* s = a + i;
      for (i64 l = 0; l < kc; ++l)
        for (i64 r = 0; r < kMR; ++r) d[l * kMR + r] = r < mr ? s[l * lda + r] : 0.0f;
    } else {
      const float* s = a + i * lda;
      for (i64 r = 0; r < kMR; ++r)
        for (i64 l = 0; l < kc; ++l) d[l * kMR + r] = r < mr ? s[r * lda + l] : 0.0f;
    }
  }
}

void pack_b(const float* b, i64 ldb, bool trans, i64 kc, i64 nc, float* dst) {
  for (i64 j = 0; j < nc; j += kNR) {
    const i64 w = (nc - j < kNR) ? nc - j : kNR;
    float* d = dst + j * kc;
    if (!trans) {
      const float* s = b + j;
      for (i64 l = 0; l < kc; ++l)
        for (i64 q = 0; q < kNR; ++q) d[l * kNR + q] = q < w ? s[l * ldb + q] : 0.0f;
    } else {
      const float* s = b + j * ldb;
      for (i64 q = 0; q < kNR; ++q)
        for (i64 l = 0; l < kc; ++l) d[l * kNR + q] = q < w ? s[q * ldb + l] : 0.0f;
    }
  }
}

constexpr IsaKernels kAvx2 = {"avx2", kMR, kNR, kMC, kKC, kNC, &pack_a, &macro, &pack_b};

}  // namespace

const IsaKernels* isa_kernels_avx2() { return &kAvx2; }

}  // namespace anvil::kernels::blocked
