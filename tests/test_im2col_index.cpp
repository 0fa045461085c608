// SPDX-License-Identifier: Apache-2.0
// The index arithmetic of cuda.custom.im2col (kernels/cuda/conv_im2col_index.h, the functions its
// CUDA kernels call) on the CPU: the three passes built from im2col_value / col2im_value and
// plain triple-loop products, exactly as kernels/cuda/conv_im2col.cpp composes them per sample
// and group, against the conv2d `ref` variant in f64 on odd shapes (stride, padding, dilation,
// groups, depthwise, 1x1, asymmetric). The GPU run of the same variant is tested in
// tests/cuda/test_cuda_conv.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/core/random.h"
#include "engine/dispatch/conv_problem.h"
#include "harness/op_driver.h"
#include "helpers/variant_harness.h"
#include "kernels/cuda/conv_im2col_geometry.h"
#include "kernels/register.h"

using namespace anvil;
using anvil::cuda::Im2colGeometry;

namespace {

std::vector<double> rnd(std::int64_t n, std::uint64_t seed) {
  Generator gen(seed);
  const Tensor t = uniform({n}, -1.0, 1.0, DType::f64, &gen);
  return std::vector<double>(t.data<double>(), t.data<double>() + n);
}

// C[m, n] (+)= sum_k A(m, k) B(k, n) with element accessors.
template <typename FA, typename FB>
void matmul(std::int64_t m, std::int64_t n, std::int64_t k, FA a, FB b, double* c, bool acc) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = acc ? c[i * n + j] : 0.0;
      for (std::int64_t l = 0; l < k; ++l) s += a(i, l) * b(l, j);
      c[i * n + j] = s;
    }
}

}  // namespace

TEST_CASE("cuda.custom.im2col's index arithmetic computes the three conv passes of ref",
          "[conv][im2col]") {
  register_builtin_kernels();
  const ConvTable::Variant* ref = conv_table().find("ref");
  REQUIRE(ref != nullptr);
  // The odd shapes of the conv2d driver (harness/drivers/conv2d_driver.cpp), in f64.
  std::vector<ConvProblem> problems;
  for (const auto& np : harness::find_driver("conv2d")->group("odd")) {
    ConvProblem p = std::get<ConvProblem>(np.problem);
    if (p.has_bias || p.fuse_relu) continue;
    p.dtype = DType::f64;
    problems.push_back(p);
  }
  REQUIRE(problems.size() == 12);
  for (const ConvProblem& base : problems) {
    INFO(base.repr());
    const Im2colGeometry g = anvil::cuda::im2col_geometry_of(base);
    const std::int64_t kg = base.k_per_group(), crs = g.cg * g.r * g.s, pq = g.p * g.q,
                       hw = g.h * g.w;
    const std::vector<double> x = rnd(base.n * base.c * hw, 1), w = rnd(base.k * crs, 2),
                              dy = rnd(base.n * base.k * pq, 3);
    std::vector<double> y(dy.size()), dx(x.size()), dw(w.size());
    std::vector<double> y_ref(dy.size()), dx_ref(x.size()), dw_ref(w.size());
    for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights}) {
      ConvProblem p = base;
      p.pass = pass;
      ref->fn(ConvArgs{p, x.data(), w.data(), /*b=*/nullptr, y_ref.data(), dy.data(), dx_ref.data(),
                       dw_ref.data(), /*db=*/nullptr});
    }
    std::vector<double> col(static_cast<std::size_t>(crs * pq));
    for (std::int64_t n = 0; n < base.n; ++n)
      for (std::int64_t gi = 0; gi < base.groups; ++gi) {
        const double* xs = x.data() + (n * base.c + gi * g.cg) * hw;
        const double* wg = w.data() + gi * kg * crs;
        const std::int64_t y_off = (n * base.k + gi * kg) * pq;
        // forward: y[n, g] = W_g [Kg, CRS] x col [CRS, PQ]
        for (std::int64_t i = 0; i < crs * pq; ++i) col[i] = cuda::im2col_value(xs, g, i);
        matmul(
            kg, pq, crs, [&](auto i, auto l) { return wg[i * crs + l]; },
            [&](auto l, auto j) { return col[l * pq + j]; }, y.data() + y_off, false);
        // backward weights: dW_g += dy[n, g] x col^T
        matmul(
            kg, crs, pq, [&](auto i, auto l) { return dy[y_off + i * pq + l]; },
            [&](auto l, auto j) { return col[j * pq + l]; }, dw.data() + gi * kg * crs, n > 0);
        // backward data: col = W_g^T x dy[n, g], dx[n, g] = col2im(col)
        matmul(
            crs, pq, kg, [&](auto i, auto l) { return wg[l * crs + i]; },
            [&](auto l, auto j) { return dy[y_off + l * pq + j]; }, col.data(), false);
        double* dxs = dx.data() + (n * base.c + gi * g.cg) * hw;
        for (std::int64_t i = 0; i < g.cg * hw; ++i) dxs[i] = cuda::col2im_value(col.data(), g, i);
      }
    CHECK(test::max_error(y, y_ref).worst <= 1e-12);
    CHECK(test::max_error(dx, dx_ref).worst <= 1e-12);
    CHECK(test::max_error(dw, dw_ref).worst <= 1e-12);
  }
}
