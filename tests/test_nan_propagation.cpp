// SPDX-License-Identifier: Apache-2.0
// NaN stays visible (Note [NaN propagation], kernels/cpu/elementwise_functors.h), as in PyTorch:
// relu, relu_backward, maximum, max pooling (values, workspace and backward), max reductions and
// the relu fused into a convolution, under every CPU variant of each table, f32 and f64 (max
// pooling also bf16 and f16, in the variants that take them), dense (the vector selects) and
// strided. The CUDA kernels have the same checks in tests/cuda/test_cuda_pointwise.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/elementwise_problem.h"
#include "engine/dispatch/pool_problem.h"
#include "engine/dispatch/reduce_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/pool.h"
#include "engine/ops/reduce.h"
#include "helpers/gradcheck.h"
#include "kernels/register.h"

using namespace anvil;
using anvil::test::values_f64;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <typename Table>
std::vector<std::string> cpu_variants(const Table& table) {
  register_builtin_kernels();
  std::vector<std::string> out;
  for (const auto& v : table.variants())
    if (v.device == DeviceType::cpu) out.push_back(v.name);
  return out;
}

Tensor tensor_of(const std::vector<double>& v, const Shape& shape, DType dt) {
  return Tensor::from_vector(v, shape).to(dt);
}

// n values of mixed sign (and zeros), NaN at every i % period == phase.
std::vector<double> with_nans(std::int64_t n, int period, int phase) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[i] = i % period == phase ? kNaN : static_cast<double>(i % 3 - 1) * (0.25 + i % 11);
  return v;
}

// Same values, NaN in the same places.
bool same(double got, double want) { return std::isnan(want) ? std::isnan(got) : got == want; }

}  // namespace

TEST_CASE("relu and relu_backward propagate NaN under every CPU variant", "[nan][elementwise]") {
  const auto variants = cpu_variants(elementwise_table());
  REQUIRE(variants.size() >= 2);  // ref and cpu.omp
  NoGradGuard no_grad;
  for (const auto& name : variants) {
    ForceVariant force("elementwise", name);
    // 37: vector body and tail; 70001: over the parallel grain (blocks of the dense path).
    for (const std::int64_t n : {37, 70001}) {
      for (DType dt : {DType::f32, DType::f64}) {
        INFO(name << " n=" << n << " " << dtype_name(dt));
        const auto xv = with_nans(n, 5, 2);
        const Tensor x = tensor_of(xv, {n}, dt);
        const Tensor y = ops::unary(EwOp::relu, x);
        const Tensor dy = Tensor::full({n}, 2.0, dt);
        const Tensor dx = ops::binary(EwOp::relu_backward, y, dy);
        const auto yv = values_f64(y), dxv = values_f64(dx);
        int bad_y = 0, bad_dx = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          const double want_y = std::isnan(xv[i]) ? kNaN : std::max(xv[i], 0.0);
          // PyTorch's threshold_backward on the output: dy passes where y is NaN or > 0.
          const double want_dx = std::isnan(xv[i]) || xv[i] > 0 ? 2.0 : 0.0;
          bad_y += !same(yv[i], want_y);
          bad_dx += !same(dxv[i], want_dx);
        }
        CHECK(bad_y == 0);
        CHECK(bad_dx == 0);
      }
    }
    // Strided operands (the coalesced loops, not the dense vector select).
    const auto xv = with_nans(2 * 19, 4, 1);
    const Tensor xt = tensor_of(xv, {19, 2}, DType::f32).t();  // [2, 19], not contiguous
    const auto yv = values_f64(ops::unary(EwOp::relu, xt));
    const auto xtv = values_f64(xt);
    int bad = 0;
    for (std::size_t i = 0; i < yv.size(); ++i)
      bad += !same(yv[i], std::isnan(xtv[i]) ? kNaN : std::max(xtv[i], 0.0));
    CHECK(bad == 0);
  }
}

// The dense f32 relu runs two vectors per iteration, then one, then scalars (Note
// [NaN-propagating relu speed], kernels/cpu/omp/elementwise_omp.cpp): every length from 0 to 80
// crosses each of those loops and their joins; -0 gives +0 and NaN stays NaN, also in place.
TEST_CASE("the dense f32 relu select follows the rule at every length and in place",
          "[nan][elementwise]") {
  register_builtin_kernels();
  ForceVariant force("elementwise", "cpu.omp");
  NoGradGuard no_grad;
  for (std::int64_t n = 0; n <= 80; ++n) {
    std::vector<double> xv = with_nans(n, 7, 3);
    for (std::int64_t i = 0; i < n; i += 5) xv[i] = -0.0;
    for (const bool in_place : {false, true}) {
      INFO("n=" << n << (in_place ? " in place" : ""));
      const Tensor x = tensor_of(xv, {n}, DType::f32);
      const Tensor y = in_place ? x : Tensor::empty({n});
      ops::unary_into(EwOp::relu, y, x);
      const auto yv = values_f64(y);
      int bad = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const double want = std::isnan(xv[i]) ? kNaN : std::max(xv[i], 0.0);
        bad += !same(yv[i], want) || std::signbit(yv[i]);
      }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("maximum propagates NaN from either operand under every CPU variant",
          "[nan][elementwise]") {
  NoGradGuard no_grad;
  for (const auto& name : cpu_variants(elementwise_table())) {
    ForceVariant force("elementwise", name);
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(name << " " << dtype_name(dt));
      const std::int64_t n = 41;
      const auto av = with_nans(n, 6, 1), bv = with_nans(n, 7, 3);
      const auto got =
          values_f64(ops::binary(EwOp::maximum, tensor_of(av, {n}, dt), tensor_of(bv, {n}, dt)));
      int bad = 0;
      for (std::int64_t i = 0; i < n; ++i)
        bad +=
            !same(got[i], std::isnan(av[i]) || std::isnan(bv[i]) ? kNaN : std::max(av[i], bv[i]));
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("max pooling propagates NaN and routes its gradient to it under every CPU variant",
          "[nan][pool]") {
  NoGradGuard no_grad;
  struct Geo {
    std::int64_t h, w, k, s, p;
  };
  // A 3x3/2 with padding (ResNet's stem pool), a 2x2/2 (VGG), and a 3x3/1 over a wide row
  // (the vectorised interior sweep of cpu.omp). NaNs are 4 rows and 5 columns apart, so each
  // window holds at most one and the choice among several NaNs does not matter.
  const std::vector<Geo> geos = {{9, 11, 3, 2, 1}, {8, 10, 2, 2, 0}, {7, 70, 3, 1, 0}};
  std::vector<std::string> variants = {""};  // "" = the default selection
  for (const auto& name : cpu_variants(max_pool2d_table())) {
    // See Note [oneDNN max pooling and NaN]: oneDNN drops NaN, so it is opt-in for max pooling
    // (in bf16 too: Note [oneDNN bf16 pooling]).
    if (max_pool2d_table().find(name)->opt_in)
      CHECK((name == "cpu.onednn" || name == "cpu.onednn.bf16"));
    else
      variants.push_back(name);
  }
  CHECK(variants.size() >= 5);  // default, cpu.omp, cpu.bf16_via_f32, cpu.f16_via_f32, ref
  for (const auto& name : variants) {
    for (const Geo& g : geos) {
      for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
        const std::int64_t N = 2, C = 3;
        std::vector<double> xv(static_cast<std::size_t>(N * C * g.h * g.w));
        for (std::size_t i = 0; i < xv.size(); ++i) {
          const std::int64_t w = static_cast<std::int64_t>(i) % g.w;
          const std::int64_t h = static_cast<std::int64_t>(i) / g.w % g.h;
          const std::int64_t plane = static_cast<std::int64_t>(i) / (g.w * g.h);
          xv[i] = (h + plane) % 4 == 1 && (w + plane) % 5 == 2
                      ? kNaN
                      : std::sin(0.7 * static_cast<double>(i));  // no ties
        }
        const Tensor x = tensor_of(xv, {N, C, g.h, g.w}, dt);
        xv = values_f64(x);  // as stored (f32, bf16 and f16 round)
        const PoolProblem p = ops::pool2d_problem(PoolKind::max, x, {g.k, g.k}, {g.s, g.s},
                                                  {g.p, g.p}, false, true, "test");
        INFO((name.empty() ? "default" : name) << " " << p.repr());
        // Each variant in the dtypes it takes (the 16-bit ones in theirs only).
        if (!name.empty() && !max_pool2d_table().find(name)->supports(p).ok) continue;
        // Brute force: NaN if the window holds one (then its position), else the first max.
        std::vector<double> want_y, want_dx(xv.size(), 0.0);
        for (std::int64_t pl = 0; pl < N * C; ++pl)
          for (std::int64_t i = 0; i < p.oh; ++i)
            for (std::int64_t j = 0; j < p.ow; ++j) {
              double best = -INFINITY;
              std::int64_t at = -1;
              for (std::int64_t h = i * g.s - g.p; h < i * g.s - g.p + g.k; ++h)
                for (std::int64_t w = j * g.s - g.p; w < j * g.s - g.p + g.k; ++w) {
                  if (h < 0 || w < 0 || h >= g.h || w >= g.w) continue;
                  const std::int64_t o = (pl * g.h + h) * g.w + w;
                  if (std::isnan(best)) continue;
                  if (std::isnan(xv[o]) || xv[o] > best) {
                    best = xv[o];
                    at = o;
                  }
                }
              want_y.push_back(best);
              want_dx[at] += 1.0;
            }
        std::optional<ForceVariant> force;
        if (!name.empty()) force.emplace("max_pool2d", name);
        for (const bool training : {false, true}) {
          const ops::PoolForward fwd = ops::pool2d_forward(x, p, training);
          CHECK((name.empty() || fwd.variant == name));
          const auto yv = values_f64(fwd.y);
          REQUIRE(yv.size() == want_y.size());
          int bad = 0;
          for (std::size_t i = 0; i < yv.size(); ++i) bad += !same(yv[i], want_y[i]);
          CHECK(bad == 0);
          if (!training) continue;
          const auto dxv = values_f64(ops::pool2d_backward(Tensor::ones(fwd.y.sizes(), dt), fwd));
          int bad_dx = 0;
          for (std::size_t i = 0; i < dxv.size(); ++i) bad_dx += dxv[i] != want_dx[i];
          CHECK(bad_dx == 0);
        }
      }
    }
  }
}

TEST_CASE("max reductions return NaN and the first NaN's index under every CPU variant",
          "[nan][reduce]") {
  NoGradGuard no_grad;
  const std::vector<double> xv = {1,    3, kNaN, 2,    kNaN, 0,  //
                                  -1,   4, 4,    -2,   0,    1,  //
                                  kNaN, 5, 6,    kNaN, 9,    9};
  for (const auto& name : cpu_variants(reduce_table())) {
    ForceVariant force("reduce", name);
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(name << " " << dtype_name(dt));
      const Tensor x = tensor_of(xv, {3, 6}, dt);
      auto [rows, rows_at] = ops::max(x, 1);  // over each row (inner == 1)
      const auto rv = values_f64(rows);
      CHECK(std::isnan(rv[0]));
      CHECK(rv[1] == 4);
      CHECK(std::isnan(rv[2]));
      CHECK(values_f64(rows_at) == std::vector<double>{2, 1, 0});
      auto [cols, cols_at] = ops::max(x, 0);  // down each column (inner == 6)
      const auto cv = values_f64(cols);
      const std::vector<double> want = {kNaN, 5, kNaN, kNaN, kNaN, 9};
      for (std::size_t i = 0; i < want.size(); ++i) CHECK(same(cv[i], want[i]));
      CHECK(values_f64(cols_at) == std::vector<double>{2, 2, 0, 2, 0, 2});
    }
  }
}

TEST_CASE("a relu fused into a convolution keeps a NaN pre-activation under every CPU variant",
          "[nan][conv]") {
  NoGradGuard no_grad;
  // Channel 1's bias is NaN: that whole output channel is NaN; the others are relu'd.
  const Tensor x = tensor_of(with_nans(2 * 3 * 6 * 6, 1000, 999), {2, 3, 6, 6}, DType::f32);
  const Tensor w = tensor_of(with_nans(4 * 3 * 3 * 3, 1000, 999), {4, 3, 3, 3}, DType::f32);
  const Tensor b = tensor_of({0.5, kNaN, -0.5, 0.0}, {4}, DType::f32);
  Conv2dOptions params;
  params.padding = {1, 1};
  const ConvProblem prob = ops::conv2d_problem(x, w, b, params);
  int fused_variants = 0;
  for (const auto& name : cpu_variants(conv_table())) {
    bool supported = false;
    for (const auto& c : conv_table().candidates(prob))
      if (c.name == name) supported = c.support.ok;
    if (!supported) continue;
    INFO(name);
    ForceVariant force("conv2d", name);
    bool fused = false;
    const auto yv = values_f64(ops::conv2d_forward(x, w, b, params, /*relu=*/true, &fused));
    fused_variants += fused;
    int bad = 0;
    for (std::size_t i = 0; i < yv.size(); ++i) {
      const bool nan_channel = (i / 36) % 4 == 1;
      bad += nan_channel ? !std::isnan(yv[i]) : !(yv[i] >= 0);
    }
    CHECK(bad == 0);
  }
  CHECK(fused_variants >= 2);  // ref and cpu.im2col fuse it
}
