// SPDX-License-Identifier: Apache-2.0
// The elementwise table beyond the driver loop (every variant against `ref` on the driver's
// problems and layouts: harness/drivers/elementwise_driver.cpp, tests/test_op_drivers.cpp):
// `ref` through ops::unary / ops::binary computes every EwOp's formula, evaluated here in double,
// on every operand layout (dense, broadcast rows and columns, transposed, stepped slices, 0-D,
// permuted); every variant writes into strided and aliased outputs; relu keeps special values.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "engine/core/random.h"
#include "engine/core/views.h"
#include "engine/dispatch/elementwise_problem.h"
#include "engine/ops/elementwise.h"
#include "helpers/gradcheck.h"
#include "kernels/register.h"

using namespace anvil;
using anvil::test::values_f64;

namespace {

constexpr double kScalar = 1.75;
constexpr double kAlpha = 0.5;

struct OpSpec {
  EwOp op;
  bool positive_a = false;  // domain: a > 0
  std::function<double(double a, double b, double s, double alpha)> f;
};

const std::vector<OpSpec>& op_specs() {
  static const std::vector<OpSpec> specs = {
      {EwOp::neg, false, [](double a, double, double, double) { return -a; }},
      {EwOp::exp, false, [](double a, double, double, double) { return std::exp(a); }},
      {EwOp::log, true, [](double a, double, double, double) { return std::log(a); }},
      {EwOp::sqrt, true, [](double a, double, double, double) { return std::sqrt(a); }},
      {EwOp::sigmoid, false,
       [](double a, double, double, double) { return 1.0 / (1.0 + std::exp(-a)); }},
      {EwOp::tanh, false, [](double a, double, double, double) { return std::tanh(a); }},
      {EwOp::relu, false, [](double a, double, double, double) { return a > 0 ? a : 0.0; }},
      {EwOp::abs, false, [](double a, double, double, double) { return std::fabs(a); }},
      {EwOp::sign, false,
       [](double a, double, double, double) { return double((a > 0) - (a < 0)); }},
      {EwOp::add, false, [](double a, double b, double, double al) { return a + al * b; }},
      {EwOp::sub, false, [](double a, double b, double, double al) { return a - al * b; }},
      {EwOp::mul, false, [](double a, double b, double, double) { return a * b; }},
      {EwOp::div, false, [](double a, double b, double, double) { return a / b; }},
      {EwOp::pow, true, [](double a, double b, double, double) { return std::pow(a, b); }},
      {EwOp::maximum, false, [](double a, double b, double, double) { return a > b ? a : b; }},
      {EwOp::gt, false, [](double a, double b, double, double) { return a > b ? 1.0 : 0.0; }},
      {EwOp::add_scalar, false, [](double a, double, double s, double) { return a + s; }},
      {EwOp::mul_scalar, false, [](double a, double, double s, double) { return a * s; }},
      {EwOp::pow_scalar, true, [](double a, double, double s, double) { return std::pow(a, s); }},
      {EwOp::rsub_scalar, false, [](double a, double, double s, double) { return s - a; }},
      {EwOp::rdiv_scalar, true, [](double a, double, double s, double) { return s / a; }},
      {EwOp::sigmoid_backward, false,
       [](double y, double dy, double, double) { return dy * y * (1 - y); }},
      {EwOp::tanh_backward, false,
       [](double y, double dy, double, double) { return dy * (1 - y * y); }},
      {EwOp::relu_backward, false,
       [](double x, double dy, double, double) { return x > 0 ? dy : 0.0; }},
      {EwOp::pow_scalar_backward, true,
       [](double x, double dy, double s, double) { return dy * s * std::pow(x, s - 1); }},
  };
  return specs;
}

// Operand layouts: each returns (a, b) views over fresh random buffers, shapes broadcastable.
struct Layout {
  const char* name;
  std::function<std::pair<Tensor, Tensor>(DType, bool positive_a, Generator&)> make;
};

Tensor rand_t(const Shape& s, DType dt, double lo, double hi, Generator& g) {
  if (dt == DType::i32 || dt == DType::i64) return randint(s, -5, 6, dt, &g);
  return uniform(s, lo, hi, dt, &g);
}
Tensor rand_a(const Shape& s, DType dt, bool positive, Generator& g) {
  return rand_t(s, dt, positive ? 0.5 : -2.0, 2.0, g);
}
Tensor rand_b(const Shape& s, DType dt, Generator& g) {
  // Away from 0 for div; mixed signs otherwise do not matter for the other ops.
  if (dt == DType::i32 || dt == DType::i64) return randint(s, -5, 6, dt, &g);
  Tensor t = uniform(s, 0.5, 2.0, dt, &g);
  return t;
}

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> l = {
      {"dense small",
       [](DType dt, bool p, Generator& g) {
         return std::pair{rand_a({5, 7}, dt, p, g), rand_b({5, 7}, dt, g)};
       }},
      {"row-broadcast b (bias-like)",
       [](DType dt, bool p, Generator& g) {
         return std::pair{rand_a({6, 13}, dt, p, g), rand_b({13}, dt, g)};
       }},
      {"column-broadcast b",
       [](DType dt, bool p, Generator& g) {
         return std::pair{rand_a({6, 9}, dt, p, g), rand_b({6, 1}, dt, g)};
       }},
      {"broadcast a against b",
       [](DType dt, bool p, Generator& g) {
         return std::pair{rand_a({1, 9}, dt, p, g), rand_b({6, 1}, dt, g)};
       }},
      {"0-D b",
       [](DType dt, bool p, Generator& g) {
         return std::pair{rand_a({4, 3}, dt, p, g), rand_b({}, dt, g)};
       }},
      {"transposed a",
       [](DType dt, bool p, Generator& g) {
         return std::pair{raw::transpose(rand_a({25, 16}, dt, p, g), 0, 1),
                          rand_b({16, 25}, dt, g)};
       }},
      {"stepped slices",
       [](DType dt, bool p, Generator& g) {
         return std::pair{raw::slice(rand_a({8, 10}, dt, p, g), 1, 1, 10, 3),
                          raw::slice(rand_b({16, 3}, dt, g), 0, 0, 16, 2)};
       }},
      {"permuted 3-D",
       [](DType dt, bool p, Generator& g) {
         return std::pair{raw::permute(rand_a({3, 4, 5}, dt, p, g), {2, 0, 1}),
                          rand_b({5, 3, 4}, dt, g)};
       }},
  };
  return l;
}

// Worst |got - want| / (1 + |want|) over the elements.
double worst_rel(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double w = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    double e = std::fabs(got[i] - want[i]) / (1.0 + std::fabs(want[i]));
    if (std::isnan(e)) e = INFINITY;
    w = std::max(w, e);
  }
  return w;
}

}  // namespace

// ref is the drivers' oracle: here it meets the formula, through the ops layer's layouts.
TEST_CASE("ref computes every elementwise op's formula on every layout",
          "[elementwise][variants]") {
  register_builtin_kernels();
  ForceVariant force("elementwise", "ref");
  std::uint64_t seed = 1;
  for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64}) {
    const bool is_int = dt == DType::i32 || dt == DType::i64;
    const double tol = dt == DType::f32 ? 4e-6 : dt == DType::f64 ? 1e-13 : 0.0;
    for (const auto& spec : op_specs()) {
      if (is_int && !ew_allows_integers(spec.op)) continue;
      for (const auto& layout : layouts()) {
        Generator g(++seed);
        const auto [a, b] = layout.make(dt, spec.positive_a, g);
        const bool binary = ew_arity(spec.op) == 2;
        // Scalars the integer kernels can represent exactly.
        const double s = is_int ? 3.0 : kScalar, alpha = is_int ? 2.0 : kAlpha;
        const Shape shape =
            binary ? raw::broadcast_shapes(a.sizes(), b.sizes(), "test") : a.sizes();
        const auto av = values_f64(raw::expand(a, shape));
        const auto bv = binary ? values_f64(raw::expand(b, shape)) : av;
        std::vector<double> want(av.size());
        for (std::size_t i = 0; i < av.size(); ++i) {
          want[i] = spec.f(av[i], bv[i], s, alpha);
          if (dt == DType::f32) want[i] = static_cast<float>(want[i]);
        }
        INFO(ew_name(spec.op) << ' ' << dtype_name(dt) << ' ' << layout.name << ' '
                              << shape_str(a.sizes()) << " / " << shape_str(b.sizes()));
        const Tensor out =
            binary ? ops::binary(spec.op, a, b, alpha, s) : ops::unary(spec.op, a, s);
        CHECK(out.dtype() == dt);
        const double worst = worst_rel(values_f64(out), want);  // |got - want| / (1 + |want|)
        CHECK(worst <= tol);
      }
    }
  }
}

TEST_CASE("every elementwise variant writes into strided and aliased outputs",
          "[elementwise][variants]") {
  register_builtin_kernels();
  for (const auto& v : elementwise_table().variants()) {
    INFO("variant " << v.name);
    ForceVariant force("elementwise", v.name);
    Generator g(7);
    // out is a transposed view of a bigger buffer: only its elements change.
    Tensor buf = Tensor::full({300, 200}, -7.0);
    Tensor out =
        raw::slice(raw::transpose(buf, 0, 1), 1, 0, 250, 1);  // [200, 250], strides [1, 200]
    Tensor a = uniform({200, 250}, -1, 1, DType::f32, &g),
           b = uniform({250}, -1, 1, DType::f32, &g);
    ops::binary_into(EwOp::mul, out, a, b);
    const auto got = values_f64(out), av = values_f64(a), bv = values_f64(b);
    double worst = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::fabs(got[i] - static_cast<float>(av[i] * bv[i % 250])));
    CHECK(worst == 0.0);
    const auto all = values_f64(buf);
    std::int64_t untouched = 0;
    for (double x : all) untouched += x == -7.0;
    CHECK(untouched == 300 * 200 - 200 * 250);
    // In place (out aliases a), dense and broadcast, below and above the parallel grain.
    for (std::int64_t n : {10, 50000}) {
      Tensor x = Tensor::full({n}, 1.0);
      ops::add_(x, Tensor::scalar(2.0), 0.5);
      CHECK(values_f64(x) == std::vector<double>(static_cast<std::size_t>(n), 2.0));
      ops::mul_scalar_(x, -3.0);
      CHECK(values_f64(x) == std::vector<double>(static_cast<std::size_t>(n), -6.0));
    }
  }
}

// The dense f32 relu and relu_backward run as vector selects (Note [ReLU selects],
// kernels/cpu/omp/elementwise_omp.cpp): the special values keep the functors' meaning
// (NaN stays NaN, -0 -> 0, +inf stays; the gradient is 0 where x <= 0 and passes elsewhere, NaN
// included: Note [NaN propagation]), every length's vector tail is right, and relu may write
// over its input.
TEST_CASE(
    "relu and relu_backward keep special values and vector tails and work in place on every "
    "variant",
    "[elementwise][variants]") {
  register_builtin_kernels();
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN(),
                  kInf = std::numeric_limits<float>::infinity();
  const std::vector<float> special = {kNaN, -0.0f, 0.0f, kInf, -kInf, 1e-45f, -1e-45f, 2.5f, -2.5f};
  for (const auto& v : elementwise_table().variants()) {
    ForceVariant force("elementwise", v.name);
    for (std::int64_t n : {1, 7, 8, 9, 23, 40001}) {
      INFO("variant " << v.name << ", n = " << n);
      Tensor x = Tensor::empty({n}), dy = Tensor::empty({n});
      for (std::int64_t i = 0; i < n; ++i) {
        x.data<float>()[i] = special[static_cast<std::size_t>(i) % special.size()];
        dy.data<float>()[i] = static_cast<float>(i + 1);
      }
      const Tensor y = ops::unary(EwOp::relu, x);
      const Tensor dx = ops::binary(EwOp::relu_backward, x, dy);
      std::int64_t wrong = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const float xi = x.data<float>()[i];
        const float want_y = std::isnan(xi) ? xi : xi > 0.0f ? xi : 0.0f;
        const float want_dx = xi <= 0.0f ? 0.0f : dy.data<float>()[i];
        const float got_y = y.data<float>()[i];
        wrong += std::isnan(want_y)
                     ? !std::isnan(got_y)
                     : !(got_y == want_y && std::signbit(got_y) == std::signbit(want_y));
        wrong += dx.data<float>()[i] != want_dx;
      }
      CHECK(wrong == 0);
      ops::unary_into(EwOp::relu, x, x);  // in place
      const auto xs = values_f64(x), ys = values_f64(y);
      std::int64_t differ = 0;
      for (std::size_t i = 0; i < xs.size(); ++i)
        differ += std::isnan(ys[i]) ? !std::isnan(xs[i]) : xs[i] != ys[i];
      CHECK(differ == 0);
    }
  }
}
