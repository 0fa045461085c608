// SPDX-License-Identifier: Apache-2.0
// kernels/cpu/vec_math.h (Note [Vectorised exp]) against std::exp over the whole float range,
// and the f32 softmax / cross-entropy kernels that use it against float64 references.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "anvil/anvil.h"
#include "engine/ops/softmax.h"
#include "helpers/gradcheck.h"
#include "kernels/cpu/vec_math.h"

using namespace anvil;
namespace vec = anvil::kernels::vec;

namespace {

// The clone the running CPU resolves to (AVX-512 / AVX2 / baseline), as the kernels call it.
ANVIL_VEC_CLONES void exp_block(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = vec::exp_f32(x[i]);
}

std::int64_t ulp_distance(float a, float b) {  // both >= 0 (exp results): bit patterns are ordered
  std::int32_t ia, ib;
  std::memcpy(&ia, &a, sizeof ia);
  std::memcpy(&ib, &b, sizeof ib);
  return std::llabs(static_cast<std::int64_t>(ia) - static_cast<std::int64_t>(ib));
}

float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

}  // namespace

TEST_CASE("vec exp_f32 within 1 ulp of std::exp over the float range", "[vec_math]") {
  // Every 61st bit pattern (70 million floats: both signs, subnormals, the overflow and
  // underflow edges, infinities and NaNs). An exhaustive walk over all 2^32 patterns gave the
  // same bound (1 ulp, 0.4 % of the floats off by one) when the header was written.
  constexpr std::int64_t kBlock = 1 << 16;
  std::vector<float> x(kBlock), y(kBlock);
  std::int64_t worst = 0, nan_mismatch = 0;
  float worst_x = 0;
  double worst_rel = 0;
  std::uint64_t b = 0;
  while (b < (1ull << 32)) {
    std::int64_t n = 0;
    for (; n < kBlock && b < (1ull << 32); ++n, b += 61)
      x[n] = from_bits(static_cast<std::uint32_t>(b));
    exp_block(x.data(), y.data(), n);
    for (std::int64_t i = 0; i < n; ++i) {
      const float e = std::exp(x[i]);
      if (std::isnan(e) || std::isnan(y[i])) {
        nan_mismatch += std::isnan(e) != std::isnan(y[i]);
        continue;
      }
      const std::int64_t d = ulp_distance(e, y[i]);
      if (d > worst) worst = d, worst_x = x[i];
      if (std::isnormal(e) && std::isfinite(e))
        worst_rel = std::max(worst_rel, std::fabs((static_cast<double>(y[i]) - e) / e));
    }
  }
  INFO("worst x = " << worst_x << " (" << worst << " ulp), max relative error " << worst_rel);
  CHECK(nan_mismatch == 0);
  CHECK(worst <= 1);
  CHECK(worst_rel < 1.2e-7);
}

TEST_CASE("vec exp_f32 special values match std::exp", "[vec_math]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float big[] = {88.72283f, 88.7229f, 89.0f, 100.0f, 1e30f, std::numeric_limits<float>::max(),
                       inf};
  for (float v : big) CHECK(vec::exp_f32(v) == std::exp(v));
  const float small[] = {-87.33655f, -87.4f, -100.0f, -103.9720f, -103.98f, -104.0f, -1e30f, -inf};
  for (float v : small) CHECK(ulp_distance(vec::exp_f32(v), std::exp(v)) <= 1);
  CHECK(vec::exp_f32(-inf) == 0.0f);
  CHECK(std::isinf(vec::exp_f32(inf)));
  CHECK(vec::exp_f32(0.0f) == 1.0f);
  CHECK(vec::exp_f32(-0.0f) == 1.0f);
  CHECK(std::isnan(vec::exp_f32(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(vec::exp_f32(-std::numeric_limits<float>::quiet_NaN())));
  CHECK(vec::sigmoid<float>(-inf) == 0.0f);
  CHECK(vec::sigmoid<float>(inf) == 1.0f);
  CHECK(vec::sigmoid<float>(-200.0f) == 0.0f);
  CHECK(vec::exp<double>(1.0) == std::exp(1.0));
}

// The normal-range form (the LSTM gates): every float in [-87, 88] within 1 ulp of std::exp,
// a normal result everywhere, and the clamp outside.
ANVIL_VEC_CLONES void exp_normal_block(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = vec::exp_f32_normal(x[i]);
}

TEST_CASE("vec exp_f32_normal within 1 ulp of std::exp on [-87, 88], clamped outside",
          "[vec_math]") {
  // Every 61st bit pattern of [0, 88] and of [-87, -0] (36 million floats).
  std::vector<float> x, y;
  std::uint32_t hi, lo;
  const float fhi = 88.0f, flo = -87.0f;
  std::memcpy(&hi, &fhi, sizeof hi);
  std::memcpy(&lo, &flo, sizeof lo);
  for (std::uint64_t b = 0; b <= hi; b += 61) x.push_back(from_bits(static_cast<std::uint32_t>(b)));
  for (std::uint64_t b = 0x80000000u; b <= lo; b += 61)
    x.push_back(from_bits(static_cast<std::uint32_t>(b)));
  x.push_back(-87.0f);
  x.push_back(88.0f);
  y.resize(x.size());
  exp_normal_block(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  std::int64_t worst = 0, not_normal = 0;
  float worst_x = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::int64_t d = ulp_distance(std::exp(x[i]), y[i]);
    if (d > worst) worst = d, worst_x = x[i];
    not_normal += !std::isnormal(y[i]);
  }
  INFO(x.size() << " floats, worst x = " << worst_x << " (" << worst << " ulp)");
  CHECK(x.size() > 10000000);
  CHECK(worst <= 1);
  CHECK(not_normal == 0);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {-87.5f, -100.0f, -1e30f, -inf})
    CHECK(vec::exp_f32_normal(v) == vec::exp_f32_normal(-87.0f));
  for (float v : {88.5f, 100.0f, 1e30f, inf})
    CHECK(vec::exp_f32_normal(v) == vec::exp_f32_normal(88.0f));
  CHECK(vec::exp_f32_normal(0.0f) == 1.0f);
  CHECK(std::isnan(vec::exp_f32_normal(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("f32 softmax and cross-entropy kernels against float64", "[vec_math][softmax]") {
  // Wide rows (several chunks of the one-pass log-sum-exp, max growing along the row) and
  // narrow rows; large logits so that exp(x - max) spans the whole range.
  for (std::int64_t cols : {1, 7, 1000, 2500, 10000}) {
    const std::int64_t rows = 9;
    Generator gen(cols);
    Tensor x64 = normal({rows, cols}, 0.0, 8.0, DType::f64, &gen);
    {  // a rising ramp in row 0 forces rescaling of the running sum
      double* p = x64.data<double>();
      for (std::int64_t c = 0; c < cols; ++c) p[c] = 0.01 * static_cast<double>(c);
    }
    Tensor x32 = x64.to(DType::f32), x64r = x32.to(DType::f64);  // same values in both
    Tensor t = randint({rows}, 0, cols, DType::i64, &gen);
    auto [l32, lse32] = ops::cross_entropy_forward(x32, t);
    auto [l64, lse64] = ops::cross_entropy_forward(x64r, t);
    Tensor d32 = ops::cross_entropy_backward(x32, t, lse32, 0.5);
    Tensor d64 = ops::cross_entropy_backward(x64r, t, lse64, 0.5);
    Tensor s32 = ops::softmax(x32), s64 = ops::softmax(x64r);
    Tensor ls32 = ops::log_softmax(x32), ls64 = ops::log_softmax(x64r);
    Tensor g = normal({rows, cols}, 0.0, 1.0, DType::f64, &gen);
    // The backward kernels on the same (f32-rounded) inputs: only the kernels' own error left.
    Tensor g32 = g.to(DType::f32);
    Tensor b32 = ops::softmax_backward(ls32, g32, true);
    Tensor b64 = ops::softmax_backward(ls32.to(DType::f64), g32.to(DType::f64), true);
    using anvil::test::max_abs_diff;  // NaN counts as the largest difference
    INFO("cols = " << cols);
    CHECK(max_abs_diff(lse32, lse64) < 5e-5);
    CHECK(max_abs_diff(l32, l64) < 5e-5);
    CHECK(max_abs_diff(d32, d64) < 1e-5);
    CHECK(max_abs_diff(s32, s64) < 1e-5);
    CHECK(max_abs_diff(ls32, ls64) < 5e-5);
    CHECK(max_abs_diff(b32, b64) < 5e-5);
  }
}

TEST_CASE("f32 log-sum-exp keeps the edge cases of the plain formula", "[vec_math][softmax]") {
  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  auto lse_of = [](const std::vector<float>& v) {
    Tensor x = Tensor::from_vector(v, {1, static_cast<std::int64_t>(v.size())});
    Tensor t = Tensor::from_vector(std::vector<std::int64_t>{0}, {1});
    return ops::cross_entropy_forward(x, t).second.data<float>()[0];
  };
  std::vector<float> row(3000, 1.0f);
  CHECK(std::fabs(lse_of(row) - (1.0f + std::log(3000.0f))) < 1e-5f);
  row[2500] = inf;
  CHECK(lse_of(row) == inf);  // +inf anywhere decides the row
  std::vector<float> neg(3000, -inf);
  CHECK(lse_of(neg) == -inf);
  neg[10] = nan;
  neg[2900] = 0.0f;  // NaN seen while nothing finite was found yet still poisons the row
  CHECK(std::isnan(lse_of(neg)));
  std::vector<float> mid(3000, 0.0f);
  mid[1500] = nan;
  CHECK(std::isnan(lse_of(mid)));
}

TEST_CASE("cross_entropy kernels reject out-of-range targets with anvil::Error",
          "[vec_math][softmax]") {
  Tensor x = Tensor::zeros({2, 5});
  Tensor t = Tensor::from_vector(std::vector<std::int64_t>{1, 5}, {2});
  CHECK_THROWS_AS(ops::cross_entropy_forward(x, t), anvil::Error);
  CHECK_THROWS_WITH(ops::cross_entropy_forward(x, t), Catch::Contains("out of range"));
}
