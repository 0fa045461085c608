// SPDX-License-Identifier: Apache-2.0
// BlockedPackedB (kernels/cpu/blocked/gemm_blocked.h, Note [Prepacked B]): op(B) packed once and
// multiplied many times, against a float64 product, with both micro-kernel ISAs where the CPU
// has them. Shapes cover several K blocks (K > KC = 384), N edges that are not a multiple of
// the register tile, transposed and plain A and B, accumulation into C, leading dimensions wider
// than the matrices, and products from two threads at once on one packed B.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "kernels/cpu/blocked/gemm_blocked.h"

using namespace anvil;
using kernels::BlockedPackedB;

namespace {

using i64 = std::int64_t;

std::vector<float> random_floats(i64 n, std::uint64_t seed) {
  Generator g(seed);
  const Tensor t = uniform({n}, -1, 1, DType::f32, &g);
  return std::vector<float>(t.data<float>(), t.data<float>() + n);
}

struct Case {
  i64 m, n, k;
  bool trans_a, trans_b, accumulate;
};

// Runs one case with the current ISA; returns the largest error relative to sum |a||b|.
double worst_error(const Case& c, std::uint64_t seed) {
  const i64 lda = (c.trans_a ? c.m : c.k) + 3, ldb = (c.trans_b ? c.k : c.n) + 5, ldc = c.n + 7;
  const std::vector<float> a = random_floats((c.trans_a ? c.k : c.m) * lda, seed);
  const std::vector<float> b = random_floats((c.trans_b ? c.n : c.k) * ldb, seed + 1);
  const std::vector<float> c0 = random_floats(c.m * ldc, seed + 2);
  std::vector<float> got = c0;
  const BlockedPackedB packed(b.data(), ldb, c.trans_b, c.k, c.n);
  packed.multiply(a.data(), lda, c.trans_a, c.m, got.data(), ldc, c.accumulate);
  auto A = [&](i64 i, i64 l) { return c.trans_a ? a[l * lda + i] : a[i * lda + l]; };
  auto B = [&](i64 l, i64 j) { return c.trans_b ? b[j * ldb + l] : b[l * ldb + j]; };
  double worst = 0;
  for (i64 i = 0; i < c.m; ++i)
    for (i64 j = 0; j < c.n; ++j) {
      double want = c.accumulate ? c0[i * ldc + j] : 0.0, scale = 1.0;
      for (i64 l = 0; l < c.k; ++l) {
        want += static_cast<double>(A(i, l)) * B(l, j);
        scale += std::abs(static_cast<double>(A(i, l)) * B(l, j));
      }
      worst = std::max(worst, std::abs(got[i * ldc + j] - want) / scale);
    }
  // The padding columns past n stay untouched.
  for (i64 i = 0; i < c.m; ++i)
    for (i64 j = c.n; j < ldc; ++j)
      if (got[i * ldc + j] != c0[i * ldc + j]) worst = 1.0;
  return worst;
}

// The ISAs this CPU can run (a missing one is reported, not silently skipped).
std::vector<std::string> usable_isas() {
  std::vector<std::string> isas;
  for (const char* isa : {"avx512", "avx2"}) {
    try {
      kernels::set_gemm_blocked_isa(isa);
      isas.emplace_back(isa);
    } catch (const Error& e) {
      WARN("BlockedPackedB not tested with " << isa << ": " << e.what());
    }
  }
  kernels::set_gemm_blocked_isa("auto");
  return isas;
}

}  // namespace

TEST_CASE("BlockedPackedB multiplies like a float64 GEMM with either ISA", "[gemm][blocked]") {
  const Case cases[] = {
      {128, 1024, 256, false, true, true},  // the LSTM forward step: h W_hh^T, accumulate
      {64, 1024, 256, false, true, false},  // half a batch (two row blocks)
      {37, 77, 1000, false, false, true},   // three K blocks, N edge, odd M
      {5, 33, 385, true, true, false},      // K one past KC, transposed A
      {14, 512, 16, false, false, false},   // one full register tile high, two N blocks
      {1, 1, 1, false, true, true},         // smallest
      {29, 300, 700, true, false, true},    // N over one NC block with an edge
  };
  const std::vector<std::string> isas = usable_isas();
  REQUIRE(!isas.empty());
  std::uint64_t seed = 40;
  for (const std::string& isa : isas) {
    kernels::set_gemm_blocked_isa(isa.c_str());
    for (const Case& c : cases) {
      INFO(isa << " M=" << c.m << " N=" << c.n << " K=" << c.k << " ta=" << c.trans_a
               << " tb=" << c.trans_b << " acc=" << c.accumulate);
      CHECK(worst_error(c, seed += 3) < 1e-6);
    }
  }
  kernels::set_gemm_blocked_isa("auto");
}

TEST_CASE("one BlockedPackedB serves two threads at once", "[gemm][blocked][threads]") {
  const i64 m = 64, n = 1024, k = 256;
  const std::vector<float> a = random_floats(2 * m * k, 7), b = random_floats(n * k, 8);
  const BlockedPackedB packed(b.data(), k, true, k, n);
  std::vector<float> together(2 * m * n, 0.0f), alone(2 * m * n, 0.0f);
  for (int half = 0; half < 2; ++half)
    packed.multiply(a.data() + half * m * k, k, false, m, alone.data() + half * m * n, n, false);
#pragma omp parallel num_threads(2)
  {
    const int half = omp_get_thread_num();
    if (half < 2)
      packed.multiply(a.data() + half * m * k, k, false, m, together.data() + half * m * n, n,
                      false);
  }
  CHECK(together == alone);  // same kernels, same order of sums: bitwise
}

TEST_CASE("BlockedPackedB rejects an empty or inconsistent operand", "[gemm][blocked][errors]") {
  const std::vector<float> b(64, 1.0f);
  CHECK_THROWS_WITH(BlockedPackedB(b.data(), 8, false, 0, 8),
                    Catch::Contains("BlockedPackedB") && Catch::Contains("0 x 8"));
  CHECK_THROWS_WITH(BlockedPackedB(b.data(), 4, false, 8, 8),
                    Catch::Contains("ldb 4") && Catch::Contains("n 8"));
}
