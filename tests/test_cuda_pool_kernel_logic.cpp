// SPDX-License-Identifier: Apache-2.0
// The per-element code of the `cuda.custom` pooling kernels (kernels/cuda/pool_window.h, which
// nvcc compiles as __host__ __device__ and g++ as host code), run on the CPU over whole problems
// and compared with the CPU `ref` for identity: outputs, max indices and gradients, on thousands
// of random geometries (padding, ceil mode, include/exclude padding, rectangular windows and
// strides, adaptive down- and upsampling) with many tied values, and on NaN/-inf windows.
// Without a GPU this checks the window, candidate-range and rounding logic the GPU runs.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/dispatch/pool_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/ops/pool.h"
#include "kernels/cuda/pool_window.h"
#include "kernels/register.h"

using namespace anvil;
using namespace anvil::cuda;

namespace {

PoolGeometry geometry_of(const PoolProblem& p) {
  PoolGeometry g;
  g.kind = p.kind == PoolKind::max   ? PoolCode::max
           : p.kind == PoolKind::avg ? PoolCode::avg
                                     : PoolCode::adaptive_avg;
  g.planes = p.planes();
  g.h = p.h;
  g.w = p.w;
  g.oh = p.oh;
  g.ow = p.ow;
  g.kh = p.kh;
  g.kw = p.kw;
  g.sh = p.sh;
  g.sw = p.sw;
  g.ph = p.ph;
  g.pw = p.pw;
  g.count_include_pad = p.count_include_pad;
  return g;
}

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
  const PoolGeometry g = geometry_of(p);
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
    pool_detail::forward_element(geometry_of(p), x.data(), y.data(), idx.data(), o, -inf);
  CHECK(y == std::vector<float>{1, 3, -inf, -inf});
  CHECK(idx == std::vector<std::int32_t>{0, 6, 8, 10});
}
