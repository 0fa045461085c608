// SPDX-License-Identifier: Apache-2.0
#pragma once
// Vectorisable float math for the CPU kernels, written with GCC vector extensions (16 x f32, one
// AVX-512 register) and plain arithmetic: no libm calls and no branches, so every clone of a
// function built with ANVIL_VEC_CLONES (AVX-512 / AVX2+FMA / baseline SSE2, resolved once at load
// time; never -march=native) gets straight-line SIMD code. GCC's auto-vectoriser does not
// vectorise the max / sum reductions or the exp of the softmax rows by itself (no -ffast-math),
// hence explicit vectors.
//
// Note [Vector width]
// A vector is 16 floats: one zmm register in the AVX-512 clone, two ymm in the AVX2 clone, four
// xmm in the baseline. Zen 4 (the dev machine) runs a 512-bit operation as two 256-bit halves,
// so 16 lanes do not add arithmetic throughput, but they halve the instructions that have to be
// decoded and scheduled, and the exp loops are limited by exactly that (~32 instructions per
// vector). The exp-and-store pass of the softmax rows, [64, 10000] floats in cache, 1 thread
// (dev VM, 2026-11-22): 8 lanes 0.616 ns per element, 8 lanes unrolled x2 / x4 0.633 / 0.625
// (so not a latency chain), 16 lanes 0.377.
//
// Note [Vectorised exp]
// exp_f32(x) / exp_f32v(v) follow Cephes' expf: n = round(x / ln 2) (by adding 1.5 * 2^23: no
// float -> int conversion, defined for NaN too), r = x - n ln 2 with ln 2 split in two constants
// (n * C1 exact), exp(r) = 1 + r + r^2 p(r), p a degree-5 minimax polynomial on [-ln2/2, ln2/2],
// then scaled by 2^n as two factors 2^(n>>1) * 2^(n - (n>>1)), each a normal float, so results
// in the subnormal range are rounded once (by the last multiply) and results above FLT_MAX
// become +inf through that multiply. x is clamped to [-104, 89] first (outside, the result is 0
// or +inf anyway; NaN passes the clamp and stays NaN).
// Against glibc's std::exp, walked over ALL 2^32 floats: at most 1 ulp everywhere (subnormal
// and overflow edges included, NaN for NaN, 0 for -inf, +inf for +inf), both in the FMA-
// contracted AVX-512 / AVX2 clones and in the baseline clone without FMA (the compiler may
// contract a * b + c, so the clones can differ from each other in the last bit);
// tests/test_vec_math.cpp re-checks every 61st float.
// exp_f32_normal(x) is the same computation for callers that need only normal results (the
// LSTM gate nonlinearities, where 1 / (1 + e^x) has saturated long before): x is clamped to
// [-87, 88] instead, where every result is a normal float, so 2^n is applied as ONE factor.
// Inside that range it gives the same values as exp_f32 (1 ulp); outside, exp(-87) = 1.65e-38
// and exp(88) = 1.65e38; NaN stays NaN. It saves the second scale factor's integer work: the
// cpu.fused forward pointwise pass ([128, 256] cells, 5 exps each, 1 thread, AVX-512 clone,
// thread CPU time, median of 15) takes 1.8 ns per cell with it, 2.6 ns with exp_f32 and 1.7 ns
// with the degree-6 Taylor exp the LSTM kernel had of its own before (2-core Intel Xeon VM,
// shared, 2026-11-25).
// Doubles keep std::exp: the f64 paths are for tests and gradchecks, not for speed.
#include <cmath>
#include <cstdint>
#include <cstring>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"  // vectors passed between always_inline helpers only

namespace anvil::kernels::vec {

// AVX-512, AVX2+FMA and baseline clones of a function (one ifunc, resolved at load time).
//
// Note [No clones under TSan]
// ThreadSanitizer builds (scripts/tsan.sh) compile the baseline
// only. There the ifunc resolvers are instrumented too, run while the dynamic loader relocates
// libanvil (before the TSan runtime is set up) and crash the process at load (gcc 12).
#if defined(__SANITIZE_THREAD__)
#define ANVIL_VEC_CLONES
#else
#define ANVIL_VEC_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

constexpr int kLanes = 16;  // Note [Vector width]
typedef float f32v __attribute__((vector_size(4 * kLanes)));
typedef std::int32_t i32v __attribute__((vector_size(4 * kLanes)));

template <typename F>
struct IntOf {
  using type = std::int32_t;
};
template <>
struct IntOf<f32v> {
  using type = i32v;
};

template <typename F>
__attribute__((always_inline)) inline F splat(float v) {
  return F{} + v;  // scalar: v; vector: v in every lane
}

__attribute__((always_inline)) inline f32v load(const float* p) {
  f32v v;
  std::memcpy(&v, p, sizeof v);  // one unaligned vector load
  return v;
}
__attribute__((always_inline)) inline void store(float* p, f32v v) { std::memcpy(p, &v, sizeof v); }

// Note [Vectorised exp]; F is float or f32v. kFullRange: exp_f32's range and edges; false:
// exp_f32_normal's clamp to [-87, 88] and one scale factor.
template <typename F, bool kFullRange = true>
__attribute__((always_inline)) inline F exp_any(F x) {
  using I = typename IntOf<F>::type;
  constexpr float kLo = kFullRange ? -104.0f : -87.0f, kHi = kFullRange ? 89.0f : 88.0f;
  x = x < splat<F>(kLo) ? splat<F>(kLo) : x;  // comparisons are false for NaN
  x = x > splat<F>(kHi) ? splat<F>(kHi) : x;
  const F shifted = x * 1.44269504088896341f + 12582912.0f;  // 1.5 * 2^23 + round(x log2 e)
  const I n = __builtin_bit_cast(I, shifted) - 0x4B400000;
  const F fn = shifted - 12582912.0f;
  F r = x - fn * 0.693359375f;   // C1: 9 significant bits, n * C1 exact
  r = r - fn * -2.12194440e-4f;  // C2 = ln 2 - C1
  const F r2 = r * r;
  F p = splat<F>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const F y = p * r2 + r + 1.0f;
  if constexpr (!kFullRange) {
    return y * __builtin_bit_cast(F, (n + 127) << 23);  // n in [-126, 127]: 2^n is normal
  } else {
    const I n1 = n >> 1;  // n in [-150, 129]: n1 and n - n1 in [-75, 65]
    const I n2 = n - n1;
    return (y * __builtin_bit_cast(F, (n1 + 127) << 23)) * __builtin_bit_cast(F, (n2 + 127) << 23);
  }
}

__attribute__((always_inline)) inline float exp_f32(float x) { return exp_any<float>(x); }
__attribute__((always_inline)) inline f32v exp_f32v(f32v x) { return exp_any<f32v>(x); }
__attribute__((always_inline)) inline float exp_f32_normal(float x) {
  return exp_any<float, false>(x);
}

// exp for the kernels' element type: the vectorised float exp, std::exp for double.
template <typename T>
__attribute__((always_inline)) inline T exp(T x) {
  if constexpr (sizeof(T) == sizeof(float))
    return exp_f32(x);
  else
    return std::exp(x);
}

// 1 / (1 + e^-x): e^-x -> inf gives 0, e^-x -> 0 gives 1, NaN stays NaN.
template <typename T>
__attribute__((always_inline)) inline T sigmoid(T x) {
  return T(1) / (T(1) + vec::exp<T>(-x));
}

// Horizontal reductions of one vector.
__attribute__((always_inline)) inline float max_lanes(f32v v, float m) {
  for (int j = 0; j < kLanes; ++j) m = v[j] > m ? v[j] : m;
  return m;
}
// The lanes added in double (a chunk's float lane sums into a row's double sum).
__attribute__((always_inline)) inline double sum_lanes(f32v v) {
  double s = 0.0;
  for (int j = 0; j < kLanes; ++j) s += static_cast<double>(v[j]);
  return s;
}

}  // namespace anvil::kernels::vec

#pragma GCC diagnostic pop
