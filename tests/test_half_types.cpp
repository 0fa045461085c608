// SPDX-License-Identifier: Apache-2.0
// The 16-bit storage types (engine/core/half_types.h): float -> bf16/f16 against known bit
// patterns (ties to even both ways, NaN, Inf, subnormals, overflow, -0), the double path
// without double rounding, every one of the 65536 patterns of each type through float and back,
// every midpoint between neighbouring values, and f16 against the CPU's F16C where it has one.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "engine/core/dtype.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

using namespace anvil;

namespace {

float from_bits32(std::uint32_t u) {
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
std::uint32_t bits32(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
std::uint16_t bf(float f) { return BFloat16(f).bits; }
std::uint16_t hf(float f) { return Float16(f).bits; }

// The value of a pattern, computed from the format's definition (not from the converters).
double bf16_value(std::uint16_t h) {
  const int e = (h >> 7) & 0xff, m = h & 0x7f;
  const double sign = (h & 0x8000) != 0 ? -1.0 : 1.0;
  if (e == 0xff) return m == 0 ? sign * INFINITY : NAN;
  if (e == 0) return sign * std::ldexp(m, -133);  // m * 2^(1 - 127 - 7)
  return sign * std::ldexp(128 + m, e - 134);     // (1 + m/128) * 2^(e - 127)
}
double f16_value(std::uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = (h & 0x8000) != 0 ? -1.0 : 1.0;
  if (e == 0x1f) return m == 0 ? sign * INFINITY : NAN;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

}  // namespace

TEST_CASE("float to bf16 rounds to nearest even, with NaN, Inf, subnormals and -0",
          "[half][bf16]") {
  CHECK(bf(1.0f) == 0x3F80);
  CHECK(bf(-2.5f) == 0xC020);
  CHECK(bf(0.0f) == 0x0000);
  CHECK(bf(-0.0f) == 0x8000);
  // Ties: 1 + 2^-8 lies halfway between 0x3F80 and 0x3F81 and goes down to the even one;
  // 1 + 3*2^-8 lies halfway between 0x3F81 and 0x3F82 and goes up to the even one.
  CHECK(bf(from_bits32(0x3F808000)) == 0x3F80);
  CHECK(bf(from_bits32(0x3F818000)) == 0x3F82);
  CHECK(bf(from_bits32(0xBF818000)) == 0xBF82);  // the same for negative values
  CHECK(bf(from_bits32(0x3F808001)) == 0x3F81);  // just above half: up
  CHECK(bf(from_bits32(0x3F807FFF)) == 0x3F80);  // just below half: down
  CHECK(bf(1.0f / 3.0f) == 0x3EAB);              // 0x3EAAAAAB
  // Inf and overflow: FLT_MAX rounds past bf16's largest finite value (0x7F7F).
  CHECK(bf(INFINITY) == 0x7F80);
  CHECK(bf(-INFINITY) == 0xFF80);
  CHECK(bf(std::numeric_limits<float>::max()) == 0x7F80);
  CHECK(bf(-std::numeric_limits<float>::max()) == 0xFF80);
  CHECK(bf(from_bits32(0x7F7F7FFF)) == 0x7F7F);
  // Subnormals keep f32's exponent: they round like any other value.
  CHECK(bf(from_bits32(0x00000001)) == 0x0000);  // far below half of 0x0001
  CHECK(bf(from_bits32(0x00008000)) == 0x0000);  // tie, to the even 0
  CHECK(bf(from_bits32(0x00018000)) == 0x0002);  // tie, to the even 2
  CHECK(bf(from_bits32(0x00010000)) == 0x0001);  // exact
  CHECK(bf(from_bits32(0x007FFFFF)) == 0x0080);  // rounds up into the smallest normal
  CHECK(bf(from_bits32(0x80000001)) == 0x8000);  // -tiny -> -0
  // NaN stays NaN: sign kept, quiet bit set. A signalling NaN whose payload lies in the low 16
  // bits would turn into Inf (0x7F80) if it were truncated or rounded like a number.
  CHECK(bf(from_bits32(0x7FC00000)) == 0x7FC0);
  CHECK(bf(from_bits32(0x7F800001)) == 0x7FC0);
  CHECK(bf(from_bits32(0xFF812345)) == 0xFFC1);
  CHECK(bf(from_bits32(0x7FFFFFFF)) == 0x7FFF);  // rounding must not carry out of a NaN
}

TEST_CASE("float to f16 rounds to nearest even, with NaN, Inf, subnormals, overflow and -0",
          "[half][f16]") {
  CHECK(hf(1.0f) == 0x3C00);
  CHECK(hf(-2.0f) == 0xC000);
  CHECK(hf(0.1f) == 0x2E66);
  CHECK(hf(1.0f / 3.0f) == 0x3555);
  CHECK(hf(-0.0f) == 0x8000);
  // Ties: 1 + 2^-11 is halfway between 0x3C00 and 0x3C01 (down to even); 1 + 3*2^-11 halfway
  // between 0x3C01 and 0x3C02 (up to even).
  CHECK(hf(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);
  CHECK(hf(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);
  CHECK(hf(-(1.0f + 3 * std::ldexp(1.0f, -11))) == 0xBC02);
  CHECK(hf(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)) == 0x3C01);
  // Overflow: 65504 is the largest finite value; 65520 (halfway to 2^16) ties to the even
  // neighbour, which is Inf; anything just below stays 65504.
  CHECK(hf(65504.0f) == 0x7BFF);
  CHECK(hf(std::nextafter(65520.0f, 0.0f)) == 0x7BFF);
  CHECK(hf(65520.0f) == 0x7C00);
  CHECK(hf(-65520.0f) == 0xFC00);
  CHECK(hf(1e6f) == 0x7C00);
  CHECK(hf(std::numeric_limits<float>::max()) == 0x7C00);
  CHECK(hf(INFINITY) == 0x7C00);
  CHECK(hf(-INFINITY) == 0xFC00);
  // Subnormals (units of 2^-24): produced, rounded to even, and flushed only below half a unit.
  CHECK(hf(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(hf(std::ldexp(1.0f, -25)) == 0x0000);     // tie, to the even 0
  CHECK(hf(-std::ldexp(1.0f, -25)) == 0x8000);    // -0
  CHECK(hf(std::ldexp(1.5f, -25)) == 0x0001);     // above half
  CHECK(hf(std::ldexp(3.0f, -25)) == 0x0002);     // 1.5 units: tie, to the even 2
  CHECK(hf(std::ldexp(5.0f, -25)) == 0x0002);     // 2.5 units: tie, to the even 2
  CHECK(hf(std::ldexp(1023.0f, -24)) == 0x03FF);  // largest subnormal
  CHECK(hf(std::ldexp(2047.0f, -25)) == 0x0400);  // tie between 0x03FF and 0x0400
  CHECK(hf(std::ldexp(1.0f, -14)) == 0x0400);     // smallest normal
  CHECK(hf(std::numeric_limits<float>::denorm_min()) == 0x0000);
  // NaN: quiet, sign kept; a payload only in the low bits must not become Inf.
  CHECK(hf(from_bits32(0x7FC00000)) == 0x7E00);
  CHECK(hf(from_bits32(0x7F800001)) == 0x7E00);
  const std::uint16_t neg_nan = hf(from_bits32(0xFF802000));
  CHECK(neg_nan == 0xFE01);
}

TEST_CASE("16-bit values widen to float exactly, as the formats define them", "[half]") {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto p = static_cast<std::uint16_t>(h);
    const double bv = bf16_value(p), hv = f16_value(p);
    const float bw = BFloat16::from_bits(p).to_float(), hw = Float16::from_bits(p).to_float();
    if (std::isnan(bv)) {
      REQUIRE(std::isnan(bw));
      REQUIRE(bits32(bw) >> 16 == h);  // the NaN's bits are kept
    } else {
      REQUIRE(static_cast<double>(bw) == bv);
      REQUIRE(std::signbit(bw) == ((h & 0x8000) != 0));
    }
    if (std::isnan(hv)) {
      REQUIRE(std::isnan(hw));
      REQUIRE(std::signbit(hw) == ((h & 0x8000) != 0));
    } else {
      INFO("f16 pattern " << h);
      REQUIRE(static_cast<double>(hw) == hv);
      REQUIRE(std::signbit(hw) == ((h & 0x8000) != 0));
    }
  }
}

TEST_CASE("all 65536 bf16 and f16 patterns survive a round trip through float", "[half]") {
  int nans_bf = 0, nans_hf = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto p = static_cast<std::uint16_t>(h);
    const float b = BFloat16::from_bits(p).to_float();
    const std::uint16_t b2 = BFloat16(b).bits;
    if (std::isnan(b)) {  // NaN: the same NaN, made quiet (0x0040 is bf16's quiet bit)
      ++nans_bf;
      REQUIRE(b2 == (p | 0x0040));
    } else {
      REQUIRE(b2 == p);  // includes -0, +-Inf and every subnormal
    }
    const float f = Float16::from_bits(p).to_float();
    const std::uint16_t f2 = Float16(f).bits;
    if (std::isnan(f)) {  // 0x0200 is f16's quiet bit
      ++nans_hf;
      REQUIRE(f2 == (p | 0x0200));
    } else {
      REQUIRE(f2 == p);
    }
  }
  CHECK(nans_bf == 2 * 127);  // exponent all ones, mantissa non-zero, both signs
  CHECK(nans_hf == 2 * 1023);
}

TEST_CASE("every midpoint between neighbouring 16-bit values rounds to the even one", "[half]") {
  // For each positive finite pattern p and its successor p+1: the midpoint (exact in float)
  // must round to whichever of the two is even, and the floats just beside it to the nearer.
  for (std::uint32_t p = 0; p < 0x7F80; ++p) {
    const auto lo = static_cast<std::uint16_t>(p), hi = static_cast<std::uint16_t>(p + 1);
    const double mid = (bf16_value(lo) + bf16_value(hi)) / 2;
    if (std::isinf(bf16_value(hi))) continue;  // the overflow boundary is checked above
    const auto m = static_cast<float>(mid);
    REQUIRE(static_cast<double>(m) == mid);
    REQUIRE(bf(m) == ((lo & 1) == 0 ? lo : hi));
    REQUIRE(bf(std::nextafter(m, 0.0f)) == lo);
    REQUIRE(bf(std::nextafter(m, INFINITY)) == hi);
  }
  for (std::uint32_t p = 0; p < 0x7C00; ++p) {
    const auto lo = static_cast<std::uint16_t>(p), hi = static_cast<std::uint16_t>(p + 1);
    const double hv = p + 1 == 0x7C00 ? 65536.0 : f16_value(hi);  // Inf's "value" for rounding
    const double mid = (f16_value(lo) + hv) / 2;
    const auto m = static_cast<float>(mid);
    REQUIRE(static_cast<double>(m) == mid);
    INFO("f16 midpoint above pattern " << p);
    REQUIRE(hf(m) == ((lo & 1) == 0 ? lo : hi));
    REQUIRE(hf(std::nextafter(m, 0.0f)) == lo);
    REQUIRE(hf(std::nextafter(m, INFINITY)) == hi);
  }
}

TEST_CASE("from double, 16-bit values are rounded once (no double rounding)", "[half]") {
  // 1 + 2^-11 + 2^-40 is just above the f16 midpoint between 1 and 1 + 2^-10, so it rounds up.
  // Rounded to float first (to nearest), the 2^-40 is lost, leaving an exact tie that would go
  // down to 1.0: the failure this test guards against.
  const double d16 = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  CHECK(Float16(static_cast<float>(d16)).bits == 0x3C00);  // the naive two-step result
  CHECK(Float16(d16).bits == 0x3C01);
  CHECK(Float16(-d16).bits == 0xBC01);
  const double dbf = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  CHECK(BFloat16(static_cast<float>(dbf)).bits == 0x3F80);
  CHECK(BFloat16(dbf).bits == 0x3F81);
  // Exact ties in double still go to even; beyond float's range is Inf; NaN stays NaN.
  CHECK(Float16(1.0 + std::ldexp(1.0, -11)).bits == 0x3C00);
  CHECK(BFloat16(1e300).bits == 0x7F80);
  CHECK(Float16(-1e300).bits == 0xFC00);
  CHECK(Float16(1e-300).bits == 0x0000);
  CHECK(Float16(-1e-300).bits == 0x8000);
  CHECK(std::isnan(BFloat16(std::nan("")).to_float()));
  // Integers go through double.
  CHECK(BFloat16(std::int64_t{257}).bits == 0x4380);  // 257 ties to 256 (even)
  CHECK(BFloat16(std::int32_t{259}).bits == 0x4382);  // 259 ties to 260 (even)
  CHECK(Float16(std::int64_t{2049}).bits == 0x6800);  // 2049 ties to 2048
  CHECK(convert_element<std::int32_t>(Float16(std::int64_t{-7})) == -7);
}

#if defined(__x86_64__)
namespace {
__attribute__((target("f16c"))) std::uint16_t f16c_convert(float f) {
  return static_cast<std::uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

// F16C is a VEX instruction: the CPU must have it (CPUID.1:ECX) and the OS must save AVX state,
// which __builtin_cpu_supports("avx") checks (clang 14 does not know the string "f16c").
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  return (c & bit_F16C) != 0 && __builtin_cpu_supports("avx");
}
}  // namespace

TEST_CASE("float to f16 equals the CPU's F16C conversion on a sweep of all floats", "[half]") {
  if (!cpu_has_f16c()) {
    WARN("this CPU has no F16C: the hardware cross-check did not run");
    return;
  }
  // Every 97th bit pattern (44 million floats, all exponents, NaNs and both signs).
  std::int64_t mismatches = 0;
  std::uint32_t first = 0;
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += 97) {
    const float f = from_bits32(static_cast<std::uint32_t>(u));
    if (hf(f) != f16c_convert(f)) {
      if (mismatches++ == 0) first = static_cast<std::uint32_t>(u);
    }
  }
  INFO("first mismatch at float bits " << first);
  CHECK(mismatches == 0);
}
#endif

TEST_CASE("bf16 and f16 are dtypes with names, sizes and their own visitor", "[half][dtype]") {
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(dtype_size(DType::f16) == 2);
  CHECK(dtype_name(DType::bf16) == "bf16");
  CHECK(dtype_name(DType::f16) == "f16");
  CHECK_FALSE(is_floating(DType::bf16));  // is_floating: the types kernels compute in
  CHECK(is_half(DType::f16));
  CHECK(is_any_floating(DType::bf16));
  CHECK(DTypeOf<BFloat16>::value == DType::bf16);
  CHECK(visit_all_dtypes(DType::f16, [](auto z) { return sizeof(z); }) == 2);
  CHECK(visit_all_dtypes(DType::i64, [](auto z) { return sizeof(z); }) == 8);
  // The four-type visitor refuses them: a kernel template must not be instantiated with them.
  CHECK_THROWS_WITH(visit_dtype(DType::bf16, [](auto z) { return sizeof(z); }),
                    Catch::Contains("visit_dtype") && Catch::Contains("bf16"));
  CHECK_THROWS_WITH(visit_dtype(DType::f16, [](auto z) { return sizeof(z); }),
                    Catch::Contains("f16") && Catch::Contains(".to(DType::f32)"));
}
