// SPDX-License-Identifier: Apache-2.0
// The bf16 dot-product throughput loop (vdpbf16ps), compiled with -mavx512bf16 -mavx512f
// (kernels/CMakeLists.txt) and called only where the CPU has avx512_bf16: the ceiling of the bf16
// GEMMs and convolutions, as fma_avx512.cpp's is of the FP32 ones. 12 independent accumulator
// chains, as there.
#include <immintrin.h>

#include <cstdint>

namespace anvil::detail {

// Runs `iters` x 12 vdpbf16ps of 32 bf16 pairs into 16 floats (64 FLOPs each); returns a value
// that depends on all of them so the compiler keeps the work.
float bf16_dot_loop_avx512(std::int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  // Small products, so the sums stay finite however long the loop runs.
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
  for (std::int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float lanes[16];  // not _mm512_reduce_add_ps (fma_avx512.cpp says why)
  _mm512_store_ps(lanes, s);
  float sum = 0.0f;
  for (float v : lanes) sum += v;
  return sum;
}

}  // namespace anvil::detail
