// SPDX-License-Identifier: Apache-2.0
// The 16-bit floating storage types: anvil::BFloat16 (1 sign, 8 exponent, 7 mantissa bits: f32
// cut in half) and anvil::Float16 (IEEE binary16: 1, 5, 10), with portable bit-manipulation
// conversions to and from float, rounding to nearest even. They are storage types: no arithmetic
// is defined on them, so a kernel cannot silently compute in 16 bits (Note [Half storage types]).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <type_traits>

namespace anvil {

// Note [Half storage types]
// bf16 and f16 hold values; arithmetic happens in f32. Each struct is a bare 16-bit pattern
// (`bits`) with explicit conversions, and no operators: `a + b` on two BFloat16 does not compile,
// so a kernel template instantiated with one fails at build time instead of computing garbage.
// Conversions from float round to nearest, ties to even (RNE), as IEEE 754, cuDNN, cuBLAS,
// oneDNN and PyTorch do:
//   - NaN stays NaN with its sign and the top bits of its payload, made quiet (the quiet bit,
//     the top mantissa bit, is set), so a NaN never turns into an Inf;
//   - +-Inf stays +-Inf; a finite value that rounds above the largest finite one becomes +-Inf
//     (f16: anything at or above 65520, the midpoint between 65504 and 2^16);
//   - bf16 has f32's exponent range, so f32 subnormals round to bf16 subnormals; f16's
//     subnormals (2^-24 .. 2^-14) are produced and read back exactly;
//   - -0 keeps its sign.
// Widening to float is exact (a NaN keeps its bits). From double, the value first goes to float
// with round-to-odd (truncate, and set the last bit when anything was cut off), then to 16 bits
// with RNE: float has more than 2 bits beyond either 16-bit mantissa, so that equals one direct
// RNE rounding of the double (no double-rounding error). Integers convert through double.

namespace half_detail {

// memcpy, not std::bit_cast: the header is also compiled by nvcc as C++17.
inline std::uint32_t float_bits(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(std::uint32_t u) {
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// f32 bits -> bf16 bits, RNE (Note [Half storage types]).
inline std::uint16_t float_to_bf16_bits(float f) {
  std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffU) > 0x7f800000U)  // NaN: keep sign and top payload, set the quiet bit
    return static_cast<std::uint16_t>((u >> 16) | 0x0040U);
  u += 0x7fffU + ((u >> 16) & 1U);  // add just under half an ulp, plus one on odd: ties to even
  return static_cast<std::uint16_t>(u >> 16);
}

inline float bf16_bits_to_float(std::uint16_t h) {
  return bits_float(static_cast<std::uint32_t>(h) << 16);
}

// f32 bits -> IEEE binary16 bits, RNE (Note [Half storage types]).
inline std::uint16_t float_to_f16_bits(float f) {
  const std::uint32_t all = float_bits(f);
  const auto sign = static_cast<std::uint16_t>((all >> 16) & 0x8000U);
  const std::uint32_t u = all & 0x7fffffffU;
  if (u > 0x7f800000U)  // NaN: keep sign and top 10 payload bits, set the quiet bit
    return static_cast<std::uint16_t>(sign | 0x7e00U | ((u >> 13) & 0x3ffU));
  if (u >= 0x477ff000U)  // >= 65520 (or Inf): rounds past 65504
    return static_cast<std::uint16_t>(sign | 0x7c00U);
  if (u >= 0x38800000U) {  // >= 2^-14: normal in f16; rebias the exponent (127 -> 15)
    std::uint32_t v = u - (112U << 23);
    v += 0xfffU + ((v >> 13) & 1U);  // RNE on the 13 dropped bits; a carry bumps the exponent
    return static_cast<std::uint16_t>(sign | (v >> 13));
  }
  if (u <= 0x33000000U) return sign;  // <= 2^-25, half the smallest subnormal: ties to 0
  // f16 subnormal: the value in units of 2^-24 is m * 2^(e - 126), with m the 24-bit mantissa
  // including the implicit bit and e the f32 biased exponent (102..112, so the shift is 14..24).
  const std::uint32_t m = (u & 0x7fffffU) | 0x800000U;
  const std::uint32_t shift = 126U - (u >> 23);
  std::uint32_t q = m >> shift;
  const std::uint32_t rest = m & ((1U << shift) - 1U);
  const std::uint32_t half = 1U << (shift - 1U);
  if (rest > half || (rest == half && (q & 1U) != 0U)) ++q;  // may become 0x400, the min normal
  return static_cast<std::uint16_t>(sign | q);
}

inline float f16_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000U) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fU;
  std::uint32_t m = h & 0x3ffU;
  if (e == 0x1fU) return bits_float(sign | 0x7f800000U | (m << 13));  // Inf, NaN (bits kept)
  if (e != 0) return bits_float(sign | ((e + 112U) << 23) | (m << 13));
  if (m == 0) return bits_float(sign);
  // Subnormal m * 2^-24: shift the leading 1 up to the implicit position (bit 10), one binade
  // down per shift from 2^-14 (biased f32 exponent 113).
  std::uint32_t e32 = 113;
  while ((m & 0x400U) == 0) {
    m <<= 1;
    --e32;
  }
  return bits_float(sign | (e32 << 23) | ((m & 0x3ffU) << 13));
}

// double -> float, rounding to odd (Note [Half storage types]); NaN and Inf pass through.
inline float double_to_float_round_odd(double d) {
  if (std::isnan(d) || std::isinf(d)) return static_cast<float>(d);
  constexpr double kMax = std::numeric_limits<float>::max();
  // Beyond float's range the truncation is +-FLT_MAX, whose last bit is already 1 (odd).
  if (d > kMax) return std::numeric_limits<float>::max();
  if (d < -kMax) return -std::numeric_limits<float>::max();
  float f = static_cast<float>(d);
  if (static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0F);  // truncate
  return bits_float(float_bits(f) | 1U);
}

// Constraints as enable_if (C++17 for nvcc): any arithmetic type but bool, and the integers.
template <typename A>
using IfArithmetic = std::enable_if_t<std::is_arithmetic_v<A> && !std::is_same_v<A, bool>, bool>;
template <typename A>
using IfInteger = std::enable_if_t<std::is_integral_v<A> && !std::is_same_v<A, bool>, bool>;

// The two formats: how a float becomes the 16-bit pattern and back.
struct BFloat16Format {
  static std::uint16_t from_float(float f) { return float_to_bf16_bits(f); }
  static float to_float(std::uint16_t h) { return bf16_bits_to_float(h); }
};
struct Float16Format {
  static std::uint16_t from_float(float f) { return float_to_f16_bits(f); }
  static float to_float(std::uint16_t h) { return f16_bits_to_float(h); }
};

}  // namespace half_detail

// A 16-bit floating storage type of the given format (Note [Half storage types]): the bare
// pattern and explicit conversions, no arithmetic.
template <typename Format>
struct Half16 {
  std::uint16_t bits;  // no initializer: trivial, so memcpy/memmove may copy it; Half16{} is 0

  Half16() = default;
  static Half16 from_bits(std::uint16_t b) {
    Half16 h{};
    h.bits = b;
    return h;
  }
  explicit Half16(float f) : bits(Format::from_float(f)) {}
  explicit Half16(double d) : bits(Format::from_float(half_detail::double_to_float_round_odd(d))) {}
  template <typename A, half_detail::IfInteger<A> = true>
  explicit Half16(A v) : Half16(static_cast<double>(v)) {}

  float to_float() const { return Format::to_float(bits); }
  template <typename A, half_detail::IfArithmetic<A> = true>
  explicit operator A() const {
    return static_cast<A>(to_float());
  }
};

// bfloat16: the top half of an f32 (1 sign, 8 exponent, 7 mantissa bits).
using BFloat16 = Half16<half_detail::BFloat16Format>;
// IEEE 754 binary16 (1 sign, 5 exponent, 10 mantissa bits).
using Float16 = Half16<half_detail::Float16Format>;

static_assert(sizeof(BFloat16) == 2 && sizeof(Float16) == 2);
static_assert(std::is_trivial_v<BFloat16> && std::is_trivial_v<Float16>);

template <typename T>
constexpr bool kIsHalfType = std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>;

// The type a kernel computes in for elements stored as T: float for bf16/f16, T itself otherwise.
template <typename T>
using ComputeType = std::conditional_t<kIsHalfType<T>, float, T>;

// One element converted to another element type, through float where a 16-bit type is on
// either side (bf16 <-> f16 too); plain static_cast otherwise.
template <typename D, typename S>
D convert_element(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (kIsHalfType<S>) {
    return convert_element<D>(s.to_float());
  } else {
    return static_cast<D>(s);
  }
}

// Prints the value (as float), so a tensor of bf16 prints like one of f32.
template <typename Format>
std::ostream& operator<<(std::ostream& os, Half16<Format> h) {
  return os << h.to_float();
}

}  // namespace anvil
