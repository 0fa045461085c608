// SPDX-License-Identifier: Apache-2.0
// The 16-bit CPU GEMM variants (kernels/cpu/bf16/gemm_half.h): cpu.bf16_avx512, its fallback
// cpu.bf16_via_f32, and cpu.f16_via_f32, each against an f64 product of the same rounded inputs
// on odd shapes, all four transpose modes, padded leading dims, batches and the GEMMs of the
// FCN-5 and AlexNet layers; the fallback forced by masking the CPU feature; the run-time check.
//
// Note [Half GEMM tolerance]
// The inputs are bf16/f16 values, so the f64 reference sum_l a_il*b_lj is exact up to f64 and
// every error comes from the kernel: f32 products are exact (8- or 11-bit significands), the K
// f32 additions add at most K*eps32*S with S = |alpha|*sum_l |a_il*b_lj| + |beta*c_ij|
// (the worst-case bound of a recursive sum; a blocked or paired sum is no worse), and C's final
// rounding adds u*|c| with u the unit roundoff of the storage type: 2^-8 for bf16 (8 significand
// bits), 2^-11 for f16, or, below the normal range, half the subnormal spacing d (2^-133 for
// bf16, 2^-24 for f16: weight-gradient GEMMs with K = 2 give f16 values near 1e-5). So
// |c - ref| <= u*|ref| + 2*(K+2)*eps32*S + d/2, the 2 covering the rounding of the f32 value
// that is itself off by the sum error. A wrong pair order, a lost K tail or an
// unrounded C is off by far more (order |ref|).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "engine/core/half_types.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/registration.h"
#include "harness/op_driver.h"
#include "kernels/cpu/bf16/gemm_half.h"

namespace {

using anvil::DType;
using anvil::GemmArgs;
using anvil::GemmProblem;
using anvil::GemmTable;
using i64 = std::int64_t;

struct Format {
  DType dtype;
  double unit_roundoff;
  double subnormal_step;  // spacing of the subnormals: the absolute rounding error below normal
  std::uint16_t (*from_float)(float);
  float (*to_float)(std::uint16_t);
};
const Format kBf16{DType::bf16, std::ldexp(1.0, -8), std::ldexp(1.0, -133),
                   anvil::half_detail::float_to_bf16_bits, anvil::half_detail::bf16_bits_to_float};
const Format kF16{DType::f16, std::ldexp(1.0, -11), std::ldexp(1.0, -24),
                  anvil::half_detail::float_to_f16_bits, anvil::half_detail::f16_bits_to_float};

const GemmTable::Variant& variant(const std::string& name) {
  anvil::register_builtin_kernels();
  for (const auto& v : anvil::gemm_table().variants())
    if (v.name == name) return v;
  FAIL("gemm variant " << name << " is not registered");
  throw;  // unreachable: FAIL throws
}

// Uniform in [-1, 1) from a 64-bit LCG seeded by `rng` (std::uniform_real_distribution over
// mt19937 took a third of this file's time on the models' layer GEMMs).
std::vector<std::uint16_t> random_values(const Format& f, i64 n, std::mt19937& rng) {
  std::uint64_t state = (static_cast<std::uint64_t>(rng()) << 32) | rng();
  std::vector<std::uint16_t> v(static_cast<std::size_t>(n));
  for (auto& x : v) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const float u = static_cast<float>(state >> 40) * 0x1.0p-24f;  // [0, 1), 24 bits
    x = f.from_float(2.0f * u - 1.0f);
  }
  return v;
}

// Runs `name` on p with random operands and checks C against Note [Half GEMM tolerance] (a
// sample of the elements on the largest problems: the scalar double reference costs k per
// element, and the models' layer GEMMs checked in full took 56 s in Release and 266 s under
// ASan). C starts random (read when beta != 0, NaN when beta == 0).
void check_variant(const std::string& name, const Format& f, const GemmProblem& p, double alpha,
                   double beta, std::uint32_t seed) {
  const auto& v = variant(name);
  const anvil::Support s = v.supports(p);
  INFO(name << " on " << p.repr() << " alpha=" << alpha << " beta=" << beta);
  REQUIRE(s.ok);
  std::mt19937 rng(seed);
  const i64 a_rows = p.trans_a ? p.k : p.m, b_rows = p.trans_b ? p.n : p.k;
  const i64 a_len = (p.batch - 1) * p.stride_a + a_rows * p.lda;
  const i64 b_len = (p.batch - 1) * p.stride_b + b_rows * p.ldb;
  const i64 c_len = (p.batch - 1) * p.stride_c + p.m * p.ldc;
  const auto a = random_values(f, a_len, rng), b = random_values(f, b_len, rng);
  auto c = random_values(f, c_len, rng);
  if (p.beta_zero)
    for (auto& x : c) x = f.from_float(std::nanf(""));
  const auto c_old = c;
  v.fn(GemmArgs{p, a.data(), b.data(), c.data(), alpha, beta});

  const double eps32 = std::ldexp(1.0, -23);
  int bad = 0;
  auto check_at = [&](i64 bi, i64 i, i64 j) {
    double sum = 0, mag = 0;
    for (i64 l = 0; l < p.k; ++l) {
      const double x = f.to_float(a[bi * p.stride_a + (p.trans_a ? l * p.lda + i : i * p.lda + l)]);
      const double y = f.to_float(b[bi * p.stride_b + (p.trans_b ? j * p.ldb + l : l * p.ldb + j)]);
      sum += x * y;
      mag += std::abs(x * y);
    }
    const i64 at = bi * p.stride_c + i * p.ldc + j;
    double ref = alpha * sum, s_mag = std::abs(alpha) * mag;
    if (!p.beta_zero) {
      ref += beta * f.to_float(c_old[at]);
      s_mag += std::abs(beta * f.to_float(c_old[at]));
    }
    const double got = f.to_float(c[at]);
    const double tol =
        f.unit_roundoff * std::abs(ref) + 2.0 * (p.k + 2) * eps32 * s_mag + f.subnormal_step / 2;
    if (!(std::abs(got - ref) <= tol) && bad++ < 5)
      FAIL_CHECK("C[" << bi << "][" << i << "][" << j << "] = " << got << ", expected " << ref
                      << " +- " << tol);
  };
  // Every element while the reference costs at most 2^20 multiply-adds per batch entry; above
  // (the models' layer GEMMs), the elements at the edges, seams of 64 and middle of both
  // dimensions (the tails of the vector loops and the blocks' seams) and random ones up to that
  // budget. The odd-shape test case checks every element of its problems.
  const i64 budget = (i64{1} << 20) / std::max<i64>(p.k, 1);
  for (i64 bi = 0; bi < p.batch; ++bi) {
    if (p.m * p.n <= budget) {
      for (i64 i = 0; i < p.m; ++i)
        for (i64 j = 0; j < p.n; ++j) check_at(bi, i, j);
      continue;
    }
    auto marks = [](i64 n) {
      std::vector<i64> out;
      for (i64 x : {i64{0}, i64{1}, i64{63}, i64{64}, n / 2, n - 2, n - 1})
        if (x >= 0 && x < n) out.push_back(x);
      return out;
    };
    for (i64 i : marks(p.m))
      for (i64 j : marks(p.n)) check_at(bi, i, j);
    std::uniform_int_distribution<i64> row(0, p.m - 1), col(0, p.n - 1);
    for (i64 r = 0; r < budget; ++r) check_at(bi, row(rng), col(rng));
  }
  CHECK(bad == 0);
  // Padding between rows of C is never written.
  for (i64 bi = 0; bi < p.batch; ++bi)
    for (i64 i = 0; i < p.m; ++i)
      for (i64 j = p.n; j < p.ldc; ++j) {
        const i64 at = bi * p.stride_c + i * p.ldc + j;
        REQUIRE(c[at] == c_old[at]);
      }
}

// The bf16 variants this CPU can run: the native one only with avx512_bf16 (said, not hidden).
std::vector<std::string> bf16_variants() {
  std::vector<std::string> names{"cpu.bf16_via_f32"};
  if (anvil::kernels::gemm_bf16_native_available()) {
    names.emplace_back("cpu.bf16_avx512");
    names.emplace_back("cpu.onednn.matmul_bf16");
  } else {
    WARN("this CPU lacks avx512_bf16: cpu.bf16_avx512 and cpu.onednn.matmul_bf16 are not run");
  }
  return names;
}

bool cpuinfo_has_flag(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    std::string w;
    while (words >> w)
      if (w == flag) return true;
    return false;
  }
  return false;
}

}  // namespace

TEST_CASE("16-bit gemm variants match f64 on odd shapes in all transpose modes",
          "[gemm][half][variants]") {
  const i64 sizes[] = {1, 7, 17, 63, 129};
  std::uint32_t seed = 1;
  for (const auto& [names, fmt] : {std::pair{bf16_variants(), kBf16},
                                   std::pair{std::vector<std::string>{"cpu.f16_via_f32"}, kF16}})
    for (const auto& name : names)
      for (int mode = 0; mode < 4; ++mode)
        for (i64 m : sizes)
          for (i64 n : sizes)
            for (i64 k : sizes) {
              if ((m * 7 + n * 3 + k) % 3 != 0 && !(m == 129 && n == 129)) continue;  // a sample
              auto p = GemmProblem::dense(m, n, k, mode & 1, mode & 2, fmt.dtype);
              const bool with_beta = (seed % 2) == 0;
              p.beta_zero = !with_beta;
              check_variant(name, fmt, p, with_beta ? 0.5 : 1.0, with_beta ? -1.5 : 0.0, seed++);
            }
}

TEST_CASE("16-bit gemm variants handle padded leading dims, batches and K = 0",
          "[gemm][half][variants]") {
  std::uint32_t seed = 900;
  for (const auto& [names, fmt] : {std::pair{bf16_variants(), kBf16},
                                   std::pair{std::vector<std::string>{"cpu.f16_via_f32"}, kF16}})
    for (const auto& name : names)
      for (int mode = 0; mode < 4; ++mode) {
        auto p = GemmProblem::dense(33, 19, 45, mode & 1, mode & 2, fmt.dtype, 3);
        p.lda += 5;
        p.ldb += 3;
        p.ldc += 2;
        p.stride_a = (p.trans_a ? p.k : p.m) * p.lda + 4;
        p.stride_b = (p.trans_b ? p.n : p.k) * p.ldb + 1;
        p.stride_c = p.m * p.ldc + 7;
        p.beta_zero = false;
        check_variant(name, fmt, p, 2.0, 0.25, seed++);
        auto empty_k = GemmProblem::dense(5, 9, 0, mode & 1, mode & 2, fmt.dtype);
        empty_k.lda = std::max<i64>(empty_k.lda, 1);  // validate() wants lda >= 1
        empty_k.ldb = std::max<i64>(empty_k.ldb, 1);
        empty_k.beta_zero = false;
        check_variant(name, fmt, empty_k, 1.0, 3.0, seed++);
      }
}

TEST_CASE("16-bit gemm variants match f64 on the FCN-5 and AlexNet layer GEMMs",
          "[gemm][half][variants][models]") {
  const anvil::harness::OpDriver* driver = anvil::harness::find_driver("gemm");
  REQUIRE(driver != nullptr);
  std::uint32_t seed = 5000;
  int checked = 0;
  for (const char* model : {"fcn5", "alexnet"}) {
    const auto problems = anvil::harness::model_problems(*driver, model, 2);
    REQUIRE(!problems.empty());
    for (const auto& np : problems) {
      const auto* gp = std::get_if<GemmProblem>(&np.problem);
      REQUIRE(gp != nullptr);
      INFO(model << " " << np.name);
      for (const auto& [names, fmt] :
           {std::pair{bf16_variants(), kBf16},
            std::pair{std::vector<std::string>{"cpu.f16_via_f32"}, kF16}}) {
        GemmProblem p = *gp;
        p.dtype = fmt.dtype;
        for (const auto& name : names) {
          check_variant(name, fmt, p, 1.0, p.beta_zero ? 0.0 : 1.0, seed++);
          ++checked;
        }
      }
    }
  }
  CHECK(checked >= 8);
}

TEST_CASE("the bf16 fallback runs where avx512_bf16 is missing or masked", "[gemm][half]") {
  anvil::register_builtin_kernels();
  auto p = GemmProblem::dense(17, 63, 129, false, true, DType::bf16);
  struct Unmask {
    ~Unmask() { anvil::kernels::set_gemm_bf16_mask_native(false); }
  } unmask;
  // A decision memoised before the mask must not outlive it.
  const std::string before = anvil::gemm_table().select(p).name;
  anvil::kernels::set_gemm_bf16_mask_native(true);
  CHECK_FALSE(anvil::kernels::gemm_bf16_native_available());
  CHECK(anvil::gemm_table().select(p).name == "cpu.bf16_via_f32");
  INFO("selected before the mask: " << before);
  const anvil::Support s = variant("cpu.bf16_avx512").supports(p);
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.reason, Catch::Contains("avx512_bf16"));
  CHECK(anvil::gemm_table().select_uncached(p).name == "cpu.bf16_via_f32");
  check_variant("cpu.bf16_via_f32", kBf16, p, 1.0, 0.0, 77);
  REQUIRE_THROWS_WITH(
      variant("cpu.bf16_avx512").fn(GemmArgs{p, nullptr, nullptr, nullptr, 1.0, 0.0}),
      Catch::Contains("avx512_bf16"));
}

TEST_CASE("the run-time avx512_bf16 check agrees with /proc/cpuinfo", "[gemm][half]") {
  std::ifstream probe("/proc/cpuinfo");
  if (!probe) {
    WARN("no /proc/cpuinfo to compare with: check not run");
    return;
  }
  const bool listed = cpuinfo_has_flag("avx512_bf16") && cpuinfo_has_flag("avx512f") &&
                      cpuinfo_has_flag("avx512bw") && cpuinfo_has_flag("avx512vl");
  CHECK(anvil::kernels::gemm_bf16_native_available() == listed);
  anvil::register_builtin_kernels();
  auto p = GemmProblem::dense(8, 8, 8, false, false, DType::bf16);
  CHECK(variant("cpu.bf16_avx512").supports(p).ok == listed);
}

TEST_CASE("16-bit gemm variants decline other dtypes and say why", "[gemm][half]") {
  auto f32 = GemmProblem::dense(4, 4, 4, false, false, DType::f32);
  auto f16 = GemmProblem::dense(4, 4, 4, false, false, DType::f16);
  for (const char* name : {"cpu.bf16_avx512", "cpu.bf16_via_f32"}) {
    const anvil::Support s = variant(name).supports(f32);
    CHECK_FALSE(s.ok);
    CHECK_THAT(s.reason, Catch::Contains("bf16") && Catch::Contains("f32"));
    CHECK_FALSE(variant(name).supports(f16).ok);
  }
  const anvil::Support s = variant("cpu.f16_via_f32").supports(f32);
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.reason, Catch::Contains("f16") && Catch::Contains("f32"));
  // The f32 variants decline 16-bit problems rather than misread their bytes.
  CHECK_FALSE(variant("cpu.blocked").supports(f16).ok);
}
