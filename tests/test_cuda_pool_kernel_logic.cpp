// SPDX-License-Identifier: Apache-2.0
// The per-element code of the `cuda.custom` pooling and batch-norm kernels
// (kernels/cuda/pool_window.h, batch_norm_element.h: nvcc compiles it as __host__ __device__,
// g++ as host code), run on the CPU and compared with the CPU `ref`. Pooling: whole problems,
// identity of outputs, max indices and gradients, on 1500 random geometries (padding, ceil mode,
// include/exclude padding, rectangular windows and strides, adaptive down- and upsampling) with
// many tied values, and on NaN/-inf windows. Batch norm: the kernels' loops replayed serially
// over the element functions (index mapping and formulas), every pass, f32 and f64. Without a
// GPU this checks the indexing, window, candidate-range and rounding logic the GPU runs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/dispatch/batch_norm_problem.h"
#include "engine/dispatch/pool_problem.h"
#include "engine/core/random.h"
#include "engine/dispatch/selection.h"
#include "engine/ops/batch_norm.h"
#include "engine/ops/pool.h"
#include "kernels/cuda/batch_norm_element.h"
#include "kernels/cuda/pool_geometry.h"
#include "kernels/register.h"

using namespace anvil;
using namespace anvil::cuda;

namespace {

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Runs the kernel's element functions over the whole problem and compares with ref; returns
// the number of differing values (0 = identical).
template <typename T>
int compare_with_ref(const PoolProblem& p, const std::vector<T>& xv, const std::vector<T>& dyv) {
  const Tensor x =
      Tensor::from_vector(std::vector<double>(xv.begin(), xv.end()), {p.n, p.c, p.h, p.w})
          .to(p.dtype);
  const Tensor dy =
      Tensor::from_vector(std::vector<double>(dyv.begin(), dyv.end()), {p.n, p.c, p.oh, p.ow})
          .to(p.dtype);
  ForceVariant force(pool_op_name(p.kind), "ref");
  const ops::PoolForward fw = ops::pool2d_forward(x, p, true);
  const Tensor dx = ops::pool2d_backward(dy, fw);
  const PoolGeometry g = pool_geometry_of(p);
  std::vector<T> y(static_cast<std::size_t>(p.out_numel())), gdx(xv.size());
  std::vector<std::int32_t> idx(static_cast<std::size_t>(p.out_numel()));
  const bool is_max = p.kind == PoolKind::max;
  for (std::int64_t o = 0; o < p.out_numel(); ++o)
    pool_detail::forward_element(g, xv.data(), y.data(), is_max ? idx.data() : nullptr, o,
                                 -std::numeric_limits<T>::infinity());
  for (std::int64_t e = 0; e < p.in_numel(); ++e)
    pool_detail::backward_element(g, dyv.data(), gdx.data(), idx.data(), e);
  int bad = 0;
  const T* ry = fw.y.data<T>();
  const T* rdx = dx.data<T>();
  for (std::int64_t o = 0; o < p.out_numel(); ++o) {
    bad += !same(y[o], ry[o]);
    if (is_max) bad += idx[o] != fw.workspace.data<std::int32_t>()[o];
  }
  for (std::int64_t e = 0; e < p.in_numel(); ++e) bad += !same(gdx[e], rdx[e]);
  return bad;
}

}  // namespace

TEST_CASE("cuda.custom pooling element code equals ref on random geometries", "[cuda_plan][pool]") {
  register_builtin_kernels();
  std::mt19937_64 rng(2026);
  auto r = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int problems = 0, ceil_cases = 0, upsampling = 0;
  while (problems < 1500) {
    const PoolKind kind = static_cast<PoolKind>(r(0, 2));
    const DType dt = r(0, 1) ? DType::f64 : DType::f32;
    const std::int64_t h = r(1, 11), w = r(1, 11);
    PoolProblem p;
    if (kind == PoolKind::adaptive_avg) {
      p = make_adaptive_pool_problem({2, 2, h, w}, {r(1, 9), r(1, 9)}, dt, Device::cpu(), "test");
      upsampling += p.oh > p.h || p.ow > p.w;
    } else {
      const std::int64_t kh = r(1, 5), kw = r(1, 5);
      const std::int64_t ph = r(0, static_cast<int>(kh / 2)), pw = r(0, static_cast<int>(kw / 2));
      if (kh > h + 2 * ph || kw > w + 2 * pw) continue;  // the window must fit the padded input
      p = make_pool_problem(kind, {2, 2, h, w}, {kh, kw}, {r(1, 4), r(1, 4)}, {ph, pw}, r(0, 1),
                            r(0, 1), dt, Device::cpu(), "test");
      ceil_cases += p.ceil_mode && (p.oh != pool_output_size(h, kh, p.sh, ph, false) ||
                                    p.ow != pool_output_size(w, kw, p.sw, pw, false));
    }
    ++problems;
    // Multiples of 0.5 with many zeros: ties in most max windows.
    std::uniform_real_distribution<double> u(-2, 2);
    auto tied = [&] {
      const double v = u(rng);
      return v < -0.7 ? 0.0 : std::round(v * 2) / 2;
    };
    INFO(p.repr());
    if (dt == DType::f64) {
      std::vector<double> xv(static_cast<std::size_t>(p.in_numel())),
          dyv(static_cast<std::size_t>(p.out_numel()));
      for (auto& v : xv) v = tied();
      for (auto& v : dyv) v = u(rng);
      REQUIRE(compare_with_ref(p, xv, dyv) == 0);
    } else {
      std::vector<float> xv(static_cast<std::size_t>(p.in_numel())),
          dyv(static_cast<std::size_t>(p.out_numel()));
      for (auto& v : xv) v = static_cast<float>(tied());
      for (auto& v : dyv) v = static_cast<float>(u(rng));
      REQUIRE(compare_with_ref(p, xv, dyv) == 0);
    }
  }
  // The random draw covered the cases that matter.
  CHECK(ceil_cases >= 50);
  CHECK(upsampling >= 50);
}

TEST_CASE("cuda.custom max-pool element code keeps ref's NaN and -inf rules", "[cuda_plan][pool]") {
  register_builtin_kernels();
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {1,   1,   nan,  2,    //
                                1,   1,   3,    nan,  //
                                nan, nan, -inf, nan,  //
                                nan, nan, -inf, -inf};
  const PoolProblem p = make_pool_problem(PoolKind::max, {1, 1, 4, 4}, {2, 2}, {2, 2}, {0, 0},
                                          false, true, DType::f32, Device::cpu(), "test");
  CHECK(compare_with_ref(p, x, std::vector<float>{0.5f, -1.f, 2.f, 4.f}) == 0);
  std::vector<float> y(4);
  std::vector<std::int32_t> idx(4);
  for (int o = 0; o < 4; ++o)
    pool_detail::forward_element(pool_geometry_of(p), x.data(), y.data(), idx.data(), o, -inf);
  // A NaN always wins, the last one in window order (Note [NaN propagation]).
  CHECK(y[0] == 1);
  CHECK((std::isnan(y[1]) && std::isnan(y[2]) && std::isnan(y[3])));
  CHECK(idx == std::vector<std::int32_t>{0, 7, 13, 11});
}

namespace {

// The loops of batch_norm_kernels.cu, serially, over the same element functions: statistics
// (stats_kernel), normalisation (normalize_kernel), the two sums (backward_sums_kernel) and dx
// (backward_dx_kernel).
template <typename T>
struct BnEmulation {
  BnGeometry g;
  std::vector<T> mean, var, y, dx, dw, db;

  void stats(const T* x) {
    const double m = static_cast<double>(g.n * g.hw);
    mean.assign(g.c, T(0));
    var.assign(g.c, T(0));
    for (std::int64_t c = 0; c < g.c; ++c) {
      double s = 0.0, s2 = 0.0;
      for (std::int64_t k = 0; k < g.n * g.hw; ++k)
        s += static_cast<double>(x[bn_detail::channel_offset(g, c, k)]);
      const double mu = s / m;
      for (std::int64_t k = 0; k < g.n * g.hw; ++k) {
        const double d = static_cast<double>(x[bn_detail::channel_offset(g, c, k)]) - mu;
        s2 += d * d;
      }
      mean[c] = static_cast<T>(mu);
      var[c] = static_cast<T>(s2 / m);
    }
  }
  void normalize(const T* x, const T* w, const T* b) {
    y.assign(g.n * g.c * g.hw, T(0));
    for (std::int64_t pl = 0; pl < g.n * g.c; ++pl) {
      const std::int64_t c = pl % g.c;
      const double is = bn_detail::inv_std(static_cast<double>(var[c]), g.eps);
      for (std::int64_t i = 0; i < g.hw; ++i)
        y[pl * g.hw + i] = static_cast<T>(bn_detail::normalized(
            static_cast<double>(x[pl * g.hw + i]), static_cast<double>(mean[c]), is,
            static_cast<double>(w[c]), static_cast<double>(b[c])));
    }
  }
  void backward(const T* x, const T* dy, const T* w, bool batch_stats) {
    const double m = static_cast<double>(g.n * g.hw);
    std::vector<double> sdy(g.c), sdyx(g.c);
    dw.assign(g.c, T(0));
    db.assign(g.c, T(0));
    for (std::int64_t c = 0; c < g.c; ++c) {
      const double mu = static_cast<double>(mean[c]);
      const double is = bn_detail::inv_std(static_cast<double>(var[c]), g.eps);
      for (std::int64_t k = 0; k < g.n * g.hw; ++k) {
        const std::int64_t e = bn_detail::channel_offset(g, c, k);
        sdy[c] += static_cast<double>(dy[e]);
        sdyx[c] +=
            bn_detail::dy_xhat(static_cast<double>(dy[e]), static_cast<double>(x[e]), mu, is);
      }
      db[c] = static_cast<T>(sdy[c]);
      dw[c] = static_cast<T>(sdyx[c]);
    }
    dx.assign(g.n * g.c * g.hw, T(0));
    for (std::int64_t pl = 0; pl < g.n * g.c; ++pl) {
      const std::int64_t c = pl % g.c;
      const double is = bn_detail::inv_std(static_cast<double>(var[c]), g.eps);
      for (std::int64_t i = 0; i < g.hw; ++i)
        dx[pl * g.hw + i] = static_cast<T>(bn_detail::input_gradient(
            static_cast<double>(dy[pl * g.hw + i]), static_cast<double>(x[pl * g.hw + i]),
            static_cast<double>(mean[c]), is, static_cast<double>(w[c]), sdy[c], sdyx[c], m,
            batch_stats));
    }
  }
};

template <typename T>
double worst(const std::vector<T>& got, const Tensor& want) {
  const Tensor w = want.contiguous();
  double scale = 1.0, e = 0.0;
  for (std::int64_t i = 0; i < w.numel(); ++i)
    scale = std::max(scale, std::fabs(static_cast<double>(w.data<T>()[i])));
  if (static_cast<std::int64_t>(got.size()) != w.numel()) return INFINITY;
  for (std::int64_t i = 0; i < w.numel(); ++i)
    e = std::max(e, std::fabs(static_cast<double>(got[i]) - static_cast<double>(w.data<T>()[i])));
  return e / scale;
}

template <typename T>
void check_bn(const Shape& shape, DType dt, std::uint64_t seed) {
  INFO(shape_str(shape) << " " << dtype_name(dt));
  const std::int64_t C = shape[1];
  Generator gen(seed);
  const Tensor x = uniform(shape, -1, 3, dt, &gen), dy = uniform(shape, -1, 1, dt, &gen);
  const Tensor w = uniform({C}, 0.5, 1.5, dt, &gen), b = uniform({C}, -1, 1, dt, &gen);
  const Tensor rm = uniform({C}, -0.5, 0.5, dt, &gen), rv = uniform({C}, 0.5, 2, dt, &gen);
  ForceVariant force("batch_norm2d", "ref");
  const auto tr = ops::batch_norm2d_forward(x, w, b, Tensor(), Tensor(), true, 0.1, 1e-5);
  const auto gtr = ops::batch_norm2d_backward(dy, x, w, tr);
  const auto ev = ops::batch_norm2d_forward(x, w, b, rm, rv, false, 0.1, 1e-5);
  const auto gev = ops::batch_norm2d_backward(dy, x, w, ev);
  BnEmulation<T> e;
  e.g = {shape[0], shape[1], shape[2] * shape[3], 1e-5};
  const double tol = dt == DType::f64 ? 1e-13 : 1e-6;
  e.stats(x.data<T>());
  CHECK(worst(e.mean, tr.mean) <= tol);
  CHECK(worst(e.var, tr.var) <= tol);
  e.normalize(x.data<T>(), w.data<T>(), b.data<T>());
  CHECK(worst(e.y, tr.y) <= tol);
  e.backward(x.data<T>(), dy.data<T>(), w.data<T>(), true);
  CHECK(worst(e.dx, gtr.dx) <= tol);
  CHECK(worst(e.dw, gtr.dweight) <= tol);
  CHECK(worst(e.db, gtr.dbias) <= tol);
  // Eval mode: the given statistics.
  e.mean.assign(rm.data<T>(), rm.data<T>() + C);
  e.var.assign(rv.data<T>(), rv.data<T>() + C);
  e.normalize(x.data<T>(), w.data<T>(), b.data<T>());
  CHECK(worst(e.y, ev.y) <= tol);
  e.backward(x.data<T>(), dy.data<T>(), w.data<T>(), false);
  CHECK(worst(e.dx, gev.dx) <= tol);
  CHECK(worst(e.dw, gev.dweight) <= tol);
}

}  // namespace

TEST_CASE("cuda.custom batch-norm element code equals ref", "[cuda_plan][batch_norm]") {
  register_builtin_kernels();
  std::uint64_t seed = 90;
  for (const Shape& s :
       {Shape{2, 3, 5, 7}, Shape{4, 5, 1, 1}, Shape{1, 6, 3, 3}, Shape{3, 2, 9, 1}}) {
    check_bn<float>(s, DType::f32, ++seed);
    check_bn<double>(s, DType::f64, ++seed);
  }
}
