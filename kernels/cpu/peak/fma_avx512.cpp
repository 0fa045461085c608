// SPDX-License-Identifier: Apache-2.0
// The FMA throughput loop for AVX-512, compiled with -mavx512f -mfma (kernels/CMakeLists.txt):
// 12 independent accumulator chains (FMA latency 4 x 2 pipes needs at least 8), 8 iterations
// unrolled; only this translation unit contains AVX-512 code.
#include <immintrin.h>

#include <cstdint>

namespace anvil::detail {

// Runs `iters` x 12 vector FMAs of 16 floats; returns a value that depends on all of them so the
// compiler keeps the work.
float fma_loop_avx512(std::int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (std::int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  // Not _mm512_reduce_add_ps: GCC 12's header for it trips -Wuninitialized (GCC bug 105593).
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float sum = 0.0f;
  for (float v : lanes) sum += v;
  return sum;
}

}  // namespace anvil::detail
