// SPDX-License-Identifier: Apache-2.0
// The AVX-512 BF16 micro-kernel of `cpu.bf16_avx512`: vdpbf16ps on operands packed as bf16
// pairs (Note [bf16 pair packing] in bf16_kernels.h). Compiled with -mavx512bf16 and called only
// after the driver's run-time check; it includes nothing else (Note [ISA translation units]).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/bf16/bf16_kernels.h"

namespace anvil::kernels::bf16 {
namespace {

using i64 = std::int64_t;

// A register tile of R rows x 32 columns (two 16-lane blocks): 2R accumulators, two B loads and
// one broadcast per pair, so at most 19 of the 32 zmm registers for R = 8. `nb` is 1 or 2 column
// blocks, `n_left` the valid columns of the tile (stores are masked past N).
template <int R>
void tile(const std::uint32_t* a, i64 k2, const std::uint32_t* b0, const std::uint32_t* b1, int nb,
          i64 n_left, float* c, i64 ldc) {
  __m512 acc0[R];
  __m512 acc1[R];
  for (int r = 0; r < R; ++r) {
    acc0[r] = _mm512_setzero_ps();
    acc1[r] = _mm512_setzero_ps();
  }
  for (i64 l = 0; l < k2; ++l) {
    const __m512bh bv0 = (__m512bh)_mm512_load_si512(b0 + l * 16);
    const __m512bh bv1 = nb > 1 ? (__m512bh)_mm512_load_si512(b1 + l * 16) : bv0;
    for (int r = 0; r < R; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * k2 + l]));
      acc0[r] = _mm512_dpbf16_ps(acc0[r], av, bv0);
      if (nb > 1) acc1[r] = _mm512_dpbf16_ps(acc1[r], av, bv1);
    }
  }
  const __mmask16 m0 = n_left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n_left) - 1u);
  const i64 n1 = n_left - 16;
  const __mmask16 m1 = n1 >= 16 ? __mmask16(0xFFFF)
                       : n1 > 0 ? __mmask16((1u << n1) - 1u)
                                : __mmask16(0);
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, acc0[r]);
    if (nb > 1) _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc1[r]);
  }
}

template <int R>
void row_tile(const std::uint32_t* a, i64 k2, const std::uint32_t* b_pairs, i64 n, float* c,
              i64 ldc) {
  const i64 blocks = (n + 15) / 16;
  for (i64 jb = 0; jb < blocks; jb += 2) {
    const int nb = jb + 1 < blocks ? 2 : 1;
    const std::uint32_t* b0 = b_pairs + jb * k2 * 16;
    tile<R>(a, k2, b0, b0 + k2 * 16, nb, n - jb * 16, c + jb * 16, ldc);
  }
}

}  // namespace

void pairs_gemm_avx512bf16(const std::uint32_t* a_pairs, i64 rows, i64 k2,
                           const std::uint32_t* b_pairs, i64 n, float* c, i64 ldc) {
  constexpr int kRows = 8;
  i64 i = 0;
  for (; i + kRows <= rows; i += kRows)
    row_tile<kRows>(a_pairs + i * k2, k2, b_pairs, n, c + i * ldc, ldc);
  // The last rows one at a time: a 1-row tile still uses full 32-column vectors.
  for (; i < rows; ++i) row_tile<1>(a_pairs + i * k2, k2, b_pairs, n, c + i * ldc, ldc);
}

}  // namespace anvil::kernels::bf16
