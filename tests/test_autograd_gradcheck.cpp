// SPDX-License-Identifier: Apache-2.0
// Float64 gradient checks (Note [Gradient check], tests/helpers/gradcheck.h) of every
// differentiable function in engine/autograd/functions.h and every differentiable Tensor view.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"
#include "engine/core/views.h"
#include "engine/ops/elementwise.h"
#include "helpers/gradcheck.h"

using namespace anvil;
using anvil::test::away_from_zero_leaf;
using anvil::test::distinct_leaf;
using anvil::test::gradcheck;
using anvil::test::GradcheckOptions;
using anvil::test::TensorFn;
using anvil::test::uniform_leaf;
using V = std::vector<Tensor>;

namespace {
// A leaf that is a non-contiguous view: the transpose of a fresh [cols, rows] buffer.
Tensor transposed_leaf(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  Tensor stored = uniform_leaf({cols, rows}, -1, 1, seed, false);
  Tensor t = raw::transpose(stored, 0, 1);  // a new impl, no autograd history
  t.set_requires_grad(true);
  return t;
}
}  // namespace

// ---- the checker itself must be able to fail --------------------------------------------------

TEST_CASE("gradcheck catches a wrong backward and a missing gradient", "[gradcheck]") {
  // y = x * x recorded with the wrong derivative (x instead of 2x).
  TensorFn wrong = [](const V& in) {
    Tensor out = ops::mul(in[0], in[0]);
    if (any_requires_grad({&in[0]})) {
      const Tensor xd = in[0].detach();
      record("WrongSquareBackward", {in[0]}, {out},
             [xd](const V& g) { return V{ops::mul(g[0], xd)}; });
    }
    return out;
  };
  const auto r = gradcheck("wrong_square", wrong, {uniform_leaf({2, 3}, 0.5, 1.5, 1)});
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.message, Catch::Contains("wrong_square") && Catch::Contains("input 0") &&
                            Catch::Contains("analytic") && Catch::Contains("numeric"));
  // Only one element wrong: a backward that drops the gradient of element [1,2].
  TensorFn one_off = [](const V& in) {
    Tensor out = ops::mul_scalar(in[0], 2.0);
    if (any_requires_grad({&in[0]}))
      record("OneOffBackward", {in[0]}, {out}, [](const V& g) {
        Tensor d = ops::mul_scalar(g[0], 2.0);
        d.data<double>()[5] = 0.0;
        return V{d};
      });
    return out;
  };
  const auto r2 = gradcheck("one_off", one_off, {uniform_leaf({2, 3}, -1, 1, 2)});
  CHECK_FALSE(r2.ok);
  CHECK_THAT(r2.message, Catch::Contains("[1,2]"));
  // Gradient that never reaches the input (detached inside) while the output depends on it.
  TensorFn detached = [](const V& in) { return mul(in[0].detach(), in[1]); };
  const auto r3 =
      gradcheck("detached", detached, {uniform_leaf({3}, 0.5, 1, 3), uniform_leaf({3}, 0.5, 1, 4)});
  CHECK_FALSE(r3.ok);
  CHECK_THAT(r3.message, Catch::Contains("input 0"));
  // Refuses non-f64 inputs and non-deterministic functions.
  Tensor f32 = Tensor::ones({2});
  f32.set_requires_grad(true);
  CHECK_FALSE(gradcheck("f32", [](const V& in) { return exp(in[0]); }, {f32}).ok);
  auto gen = std::make_shared<Generator>(1);
  const auto r4 = gradcheck("unseeded_dropout",
                            [gen](const V& in) { return dropout(in[0], 0.5, true, gen.get()); },
                            {uniform_leaf({8}, 0.5, 1, 5)});
  CHECK_FALSE(r4.ok);
  CHECK_THAT(r4.message, Catch::Contains("not deterministic"));
  // And passes a correct one.
  ANVIL_CHECK_GRADCHECK("square", [](const V& in) { return mul(in[0], in[0]); },
                        {uniform_leaf({2, 3}, -1, 1, 6)});
}

// ---- pointwise, with broadcasting ------------------------------------------------------------

TEST_CASE("gradcheck: add/sub/mul/div with broadcasting", "[gradcheck][pointwise]") {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 4}, {3, 4}}, {{3, 4}, {4}},       {{4}, {3, 4}}, {{3, 1}, {1, 4}},   {{}, {3, 4}},
      {{3, 4}, {}},     {{2, 3, 4}, {3, 1}}, {{1}, {}},     {{2, 1, 4}, {3, 1}}};
  const std::vector<std::pair<const char*, Tensor (*)(const Tensor&, const Tensor&)>> fns = {
      {"add", &add}, {"sub", &sub}, {"mul", &mul}, {"div", &div}};
  std::uint64_t seed = 10;
  for (const auto& [sa, sb] : shapes) {
    for (const auto& [name, f] : fns) {
      const std::string label = std::string(name) + " " + shape_str(sa) + " x " + shape_str(sb);
      Tensor a = uniform_leaf(sa, -1, 1, ++seed);
      Tensor b = std::string(name) == "div" ? away_from_zero_leaf(sb, 0.5, 1.5, ++seed)
                                            : uniform_leaf(sb, -1, 1, ++seed);
      auto fn = f;
      ANVIL_CHECK_GRADCHECK(label, [fn](const V& in) { return fn(in[0], in[1]); }, {a, b});
    }
  }
  // Only one side requiring grad.
  Tensor a = uniform_leaf({3, 4}, -1, 1, 90), b = uniform_leaf({4}, 0.5, 1, 91, false);
  ANVIL_CHECK_GRADCHECK("div a only", [](const V& in) { return div(in[0], in[1]); }, {a, b});
  Tensor c = uniform_leaf({3, 4}, -1, 1, 92, false), d = uniform_leaf({3, 1}, 0.5, 1, 93);
  ANVIL_CHECK_GRADCHECK("mul b only", [](const V& in) { return mul(in[0], in[1]); }, {c, d});
  // The same leaf on both sides.
  Tensor x = uniform_leaf({5}, 0.5, 1.5, 94);
  ANVIL_CHECK_GRADCHECK(
      "x/x+x*x-x",
      [](const V& in) { return sub(add(div(in[0], in[0]), mul(in[0], in[0])), in[0]); }, {x});
}

TEST_CASE("gradcheck: tensor operators and scalar operators", "[gradcheck][pointwise]") {
  Tensor a = uniform_leaf({2, 3}, -1, 1, 20), b = away_from_zero_leaf({3}, 0.5, 1.5, 21);
  ANVIL_CHECK_GRADCHECK("a+b", [](const V& in) { return in[0] + in[1]; }, {a, b});
  ANVIL_CHECK_GRADCHECK("a-b", [](const V& in) { return in[0] - in[1]; }, {a, b});
  ANVIL_CHECK_GRADCHECK("a*b", [](const V& in) { return in[0] * in[1]; }, {a, b});
  ANVIL_CHECK_GRADCHECK("a/b", [](const V& in) { return in[0] / in[1]; }, {a, b});
  ANVIL_CHECK_GRADCHECK("-a", [](const V& in) { return -in[0]; }, {a});
  Tensor x = away_from_zero_leaf({2, 3}, 0.3, 2.0, 22);
  ANVIL_CHECK_GRADCHECK("x+2.5", [](const V& in) { return in[0] + 2.5; }, {x});
  ANVIL_CHECK_GRADCHECK("x-2.5", [](const V& in) { return in[0] - 2.5; }, {x});
  ANVIL_CHECK_GRADCHECK("x*-3", [](const V& in) { return in[0] * -3.0; }, {x});
  ANVIL_CHECK_GRADCHECK("x/4", [](const V& in) { return in[0] / 4.0; }, {x});
  ANVIL_CHECK_GRADCHECK("2.5+x", [](const V& in) { return 2.5 + in[0]; }, {x});
  ANVIL_CHECK_GRADCHECK("2.5-x", [](const V& in) { return 2.5 - in[0]; }, {x});
  ANVIL_CHECK_GRADCHECK("-3*x", [](const V& in) { return -3.0 * in[0]; }, {x});
  ANVIL_CHECK_GRADCHECK("1.5/x", [](const V& in) { return 1.5 / in[0]; }, {x});
  ANVIL_CHECK_GRADCHECK("add_scalar", [](const V& in) { return add_scalar(in[0], -0.75); }, {x});
  ANVIL_CHECK_GRADCHECK("mul_scalar", [](const V& in) { return mul_scalar(in[0], 0.3); }, {x});
}

TEST_CASE("gradcheck: unary math and activations", "[gradcheck][pointwise]") {
  Tensor x = uniform_leaf({3, 4}, -1.5, 1.5, 30);
  Tensor pos = uniform_leaf({3, 4}, 0.3, 2.0, 31);
  ANVIL_CHECK_GRADCHECK("neg", [](const V& in) { return neg(in[0]); }, {x});
  ANVIL_CHECK_GRADCHECK("exp", [](const V& in) { return exp(in[0]); }, {x});
  ANVIL_CHECK_GRADCHECK("log", [](const V& in) { return log(in[0]); }, {pos});
  ANVIL_CHECK_GRADCHECK("sqrt", [](const V& in) { return sqrt(in[0]); }, {pos});
  for (double e : {2.0, 3.0, 0.5, -1.5, 1.0, 0.0}) {
    ANVIL_CHECK_GRADCHECK("pow " + std::to_string(e), [e](const V& in) { return pow(in[0], e); },
                          {pos});
  }
  ANVIL_CHECK_GRADCHECK("pow(x, 2) on negatives", [](const V& in) { return pow(in[0], 2.0); }, {x});
  Tensor e = uniform_leaf({3, 4}, -2, 2, 32);
  ANVIL_CHECK_GRADCHECK("pow tensor", [](const V& in) { return pow(in[0], in[1]); }, {pos, e});
  Tensor e_row = uniform_leaf({4}, -2, 2, 33);
  ANVIL_CHECK_GRADCHECK("pow tensor broadcast exponent",
                        [](const V& in) { return pow(in[0], in[1]); }, {pos, e_row});
  Tensor base_col = uniform_leaf({3, 1}, 0.3, 2.0, 34);
  ANVIL_CHECK_GRADCHECK("pow tensor broadcast base", [](const V& in) { return pow(in[0], in[1]); },
                        {base_col, e});
  ANVIL_CHECK_GRADCHECK("sigmoid", [](const V& in) { return sigmoid(in[0]); },
                        {uniform_leaf({3, 4}, -4, 4, 35)});
  ANVIL_CHECK_GRADCHECK("tanh", [](const V& in) { return tanh(in[0]); },
                        {uniform_leaf({3, 4}, -3, 3, 36)});
  ANVIL_CHECK_GRADCHECK("relu", [](const V& in) { return relu(in[0]); },
                        {away_from_zero_leaf({4, 5}, 0.05, 2, 37)});
  // A composite that reuses x on several paths (gradients must add).
  ANVIL_CHECK_GRADCHECK(
      "x*sigmoid(x)+exp(-x)*tanh(x)",
      [](const V& in) { return in[0] * sigmoid(in[0]) + exp(-in[0]) * tanh(in[0]); }, {x});
}

// ---- reductions --------------------------------------------------------------------------------

TEST_CASE("gradcheck: sum and mean over dims", "[gradcheck][reduce]") {
  Tensor x2 = uniform_leaf({3, 4}, -1, 1, 40);
  Tensor x3 = uniform_leaf({2, 3, 4}, -1, 1, 41);
  using Dims = std::vector<std::int64_t>;
  const std::vector<std::pair<Dims, bool>> cases2 = {{{}, false}, {{}, true},    {{0}, false},
                                                     {{1}, true}, {{-1}, false}, {{0, 1}, true}};
  for (const auto& [dims, keep] : cases2) {
    const std::string tag = " dims=" + shape_str(dims) + (keep ? " keepdim" : "");
    ANVIL_CHECK_GRADCHECK(
        "sum 2-D" + tag, [dims = dims, keep = keep](const V& in) { return sum(in[0], dims, keep); },
        {x2});
    ANVIL_CHECK_GRADCHECK(
        "mean 2-D" + tag,
        [dims = dims, keep = keep](const V& in) { return mean(in[0], dims, keep); }, {x2});
  }
  const std::vector<std::pair<Dims, bool>> cases3 = {
      {{1}, false},    {{1}, true},    {{0, 2}, false}, {{0, 2}, true},
      {{2, 0}, false}, {{1, 2}, true}, {{-3}, false},   {{}, false}};
  for (const auto& [dims, keep] : cases3) {
    const std::string tag = " dims=" + shape_str(dims) + (keep ? " keepdim" : "");
    ANVIL_CHECK_GRADCHECK(
        "sum 3-D" + tag, [dims = dims, keep = keep](const V& in) { return sum(in[0], dims, keep); },
        {x3});
    ANVIL_CHECK_GRADCHECK(
        "mean 3-D" + tag,
        [dims = dims, keep = keep](const V& in) { return mean(in[0], dims, keep); }, {x3});
  }
  // Reductions of a non-contiguous input.
  ANVIL_CHECK_GRADCHECK("mean of transpose dim 0", [](const V& in) { return mean(in[0].t(), {0}); },
                        {x2});
}

TEST_CASE("gradcheck: max over a dim", "[gradcheck][reduce]") {
  Tensor x2 = distinct_leaf({3, 5}, 0.1, 50);
  Tensor x3 = distinct_leaf({2, 4, 3}, 0.1, 51);
  for (std::int64_t d : {0, 1, -1})
    for (bool keep : {false, true}) {
      ANVIL_CHECK_GRADCHECK("max 2-D dim " + std::to_string(d) + (keep ? " keepdim" : ""),
                            [d, keep](const V& in) { return max(in[0], d, keep); }, {x2});
    }
  for (std::int64_t d : {0, 1, 2})
    for (bool keep : {false, true}) {
      ANVIL_CHECK_GRADCHECK("max 3-D dim " + std::to_string(d) + (keep ? " keepdim" : ""),
                            [d, keep](const V& in) { return max(in[0], d, keep); }, {x3});
    }
  ANVIL_CHECK_GRADCHECK("max of a permuted view",
                        [](const V& in) {
                          return max(in[0].permute({2, 0, 1}), 1);
                        },
                        {x3});
}

// ---- linear algebra
// ------------------------------------------------------------------------------

TEST_CASE("gradcheck: matmul", "[gradcheck][matmul]") {
  auto mm = [](const V& in) { return matmul(in[0], in[1]); };
  ANVIL_CHECK_GRADCHECK("matmul 2-D", mm,
                        {uniform_leaf({3, 4}, -1, 1, 60), uniform_leaf({4, 5}, -1, 1, 61)});
  ANVIL_CHECK_GRADCHECK("matmul 1xK @ Kx1", mm,
                        {uniform_leaf({1, 4}, -1, 1, 62), uniform_leaf({4, 1}, -1, 1, 63)});
  ANVIL_CHECK_GRADCHECK("matmul A^T (view) @ B",
                        [](const V& in) { return matmul(in[0].t(), in[1]); },
                        {uniform_leaf({4, 3}, -1, 1, 64), uniform_leaf({4, 5}, -1, 1, 65)});
  ANVIL_CHECK_GRADCHECK("matmul A @ B^T (view)",
                        [](const V& in) { return matmul(in[0], in[1].t()); },
                        {uniform_leaf({3, 4}, -1, 1, 66), uniform_leaf({5, 4}, -1, 1, 67)});
  ANVIL_CHECK_GRADCHECK("matmul A^T @ B^T (views)",
                        [](const V& in) { return matmul(in[0].t(), in[1].t()); },
                        {uniform_leaf({4, 3}, -1, 1, 68), uniform_leaf({5, 4}, -1, 1, 69)});
  // Leaves that are themselves non-contiguous views, and a slice whose leading dim exceeds its
  // width.
  ANVIL_CHECK_GRADCHECK("matmul transposed leaves", mm,
                        {transposed_leaf(3, 4, 70), transposed_leaf(4, 2, 71)});
  ANVIL_CHECK_GRADCHECK(
      "matmul column slice (ld > width)",
      [](const V& in) { return matmul(in[0].slice(1, 1, 5), in[1].slice(0, 2, 6)); },
      {uniform_leaf({3, 7}, -1, 1, 72), uniform_leaf({8, 2}, -1, 1, 73)});
  ANVIL_CHECK_GRADCHECK("matmul 3-D batched", mm,
                        {uniform_leaf({2, 3, 4}, -1, 1, 74), uniform_leaf({2, 4, 5}, -1, 1, 75)});
  ANVIL_CHECK_GRADCHECK(
      "matmul 3-D batched, transposed views",
      [](const V& in) { return matmul(in[0].transpose(1, 2), in[1].transpose(1, 2)); },
      {uniform_leaf({2, 4, 3}, -1, 1, 76), uniform_leaf({2, 5, 4}, -1, 1, 77)});
  ANVIL_CHECK_GRADCHECK("matmul 3-D batch-major view",
                        [](const V& in) { return matmul(in[0].transpose(0, 1), in[1]); },
                        {uniform_leaf({3, 2, 4}, -1, 1, 78), uniform_leaf({2, 4, 2}, -1, 1, 79)});
  ANVIL_CHECK_GRADCHECK("matmul 3-D @ 2-D", mm,
                        {uniform_leaf({2, 3, 4}, -1, 1, 80), uniform_leaf({4, 5}, -1, 1, 81)});
  ANVIL_CHECK_GRADCHECK("matmul 4-D @ 2-D^T (view)",
                        [](const V& in) { return matmul(in[0], in[1].t()); },
                        {uniform_leaf({2, 2, 3, 4}, -1, 1, 82), uniform_leaf({3, 4}, -1, 1, 83)});
  ANVIL_CHECK_GRADCHECK("matmul permuted 3-D @ 2-D",
                        [](const V& in) {
                          return matmul(in[0].permute({1, 0, 2}), in[1]);
                        },
                        {uniform_leaf({3, 2, 4}, -1, 1, 84), uniform_leaf({4, 2}, -1, 1, 85)});
}

TEST_CASE("gradcheck: linear", "[gradcheck][linear]") {
  Tensor x = uniform_leaf({3, 4}, -1, 1, 90), w = uniform_leaf({5, 4}, -1, 1, 91),
         b = uniform_leaf({5}, -1, 1, 92);
  ANVIL_CHECK_GRADCHECK("linear with bias", [](const V& in) { return linear(in[0], in[1], in[2]); },
                        {x, w, b});
  ANVIL_CHECK_GRADCHECK("linear without bias", [](const V& in) { return linear(in[0], in[1]); },
                        {x, w});
  Tensor x3 = uniform_leaf({2, 3, 4}, -1, 1, 93);
  ANVIL_CHECK_GRADCHECK("linear 3-D input", [](const V& in) { return linear(in[0], in[1], in[2]); },
                        {x3, w, b});
  ANVIL_CHECK_GRADCHECK("linear 1-D input", [](const V& in) { return linear(in[0], in[1], in[2]); },
                        {uniform_leaf({4}, -1, 1, 98), w, b});
  ANVIL_CHECK_GRADCHECK("linear transposed input",
                        [](const V& in) { return linear(in[0].t(), in[1], in[2]); },
                        {uniform_leaf({4, 3}, -1, 1, 94), w, b});
  // Parameters only (frozen input) and input only (frozen parameters).
  Tensor xf = uniform_leaf({3, 4}, -1, 1, 95, false);
  ANVIL_CHECK_GRADCHECK("linear params only",
                        [](const V& in) { return linear(in[0], in[1], in[2]); }, {xf, w, b});
  Tensor wf = uniform_leaf({5, 4}, -1, 1, 96, false), bf = uniform_leaf({5}, -1, 1, 97, false);
  ANVIL_CHECK_GRADCHECK("linear input only",
                        [](const V& in) { return linear(in[0], in[1], in[2]); }, {x, wf, bf});
  ANVIL_CHECK_GRADCHECK("linear bias only", [](const V& in) { return linear(in[0], in[1], in[2]); },
                        {xf, wf, b});
  // Wide output from a narrow input: the bias rides in the GEMM (Note [Bias folded into the
  // GEMM], engine/autograd/functions_linear.cpp): [16, 2] -> [16, 64] takes that path.
  Tensor xw = uniform_leaf({16, 2}, -1, 1, 88), ww = uniform_leaf({64, 2}, -1, 1, 89),
         bw = uniform_leaf({64}, -1, 1, 87);
  ANVIL_CHECK_GRADCHECK("linear wide output (folded bias)",
                        [](const V& in) { return linear(in[0], in[1], in[2]); }, {xw, ww, bw});
  ANVIL_CHECK_GRADCHECK("linear wide output, transposed input (folded bias)",
                        [](const V& in) { return linear(in[0].t(), in[1], in[2]); },
                        {uniform_leaf({2, 16}, -1, 1, 86), ww, bw});
  const Tensor folded = linear(xw, ww, bw).detach();
  const Tensor plain = (matmul(xw, ww.t()) + bw).detach();
  CHECK(anvil::test::max_abs_diff(folded, plain) < 1e-12);
}

// ---- softmax family -----------------------------------------------------------------------------

TEST_CASE("gradcheck: softmax, log_softmax, cross_entropy", "[gradcheck][softmax]") {
  Tensor x = uniform_leaf({3, 5}, -2, 2, 100);
  Tensor x3 = uniform_leaf({2, 3, 4}, -2, 2, 101);
  for (std::int64_t d : {-1, 0, 1}) {
    ANVIL_CHECK_GRADCHECK("softmax 2-D dim " + std::to_string(d),
                          [d](const V& in) { return softmax(in[0], d); }, {x});
    ANVIL_CHECK_GRADCHECK("log_softmax 2-D dim " + std::to_string(d),
                          [d](const V& in) { return log_softmax(in[0], d); }, {x});
  }
  for (std::int64_t d : {0, 1, 2}) {
    ANVIL_CHECK_GRADCHECK("softmax 3-D dim " + std::to_string(d),
                          [d](const V& in) { return softmax(in[0], d); }, {x3});
    ANVIL_CHECK_GRADCHECK("log_softmax 3-D dim " + std::to_string(d),
                          [d](const V& in) { return log_softmax(in[0], d); }, {x3});
  }
  ANVIL_CHECK_GRADCHECK("softmax 1-D", [](const V& in) { return softmax(in[0]); },
                        {uniform_leaf({6}, -2, 2, 102)});
  ANVIL_CHECK_GRADCHECK("softmax of a transposed view",
                        [](const V& in) { return softmax(in[0].t(), -1); }, {x});

  Tensor logits = uniform_leaf({4, 5}, -2, 2, 103);
  Tensor t64 = Tensor::from_vector(std::vector<std::int64_t>{1, 0, 4, 2}, {4});
  Tensor t32 = Tensor::from_vector(std::vector<std::int32_t>{3, 3, 0, 4}, {4});
  auto ce = [](const V& in) { return cross_entropy(in[0], in[1]); };
  ANVIL_CHECK_GRADCHECK("cross_entropy i64 targets", ce, {logits, t64});
  ANVIL_CHECK_GRADCHECK("cross_entropy i32 targets", ce, {logits, t32});
  ANVIL_CHECK_GRADCHECK("cross_entropy of a transposed view",
                        [](const V& in) { return cross_entropy(in[0].t(), in[1]); },
                        {uniform_leaf({5, 4}, -2, 2, 104), t64});
  // Cross-entropy equals -mean(log_softmax[target]) (value check; the gradients follow above).
  Tensor ls = log_softmax(logits.detach(), -1);
  double expect = 0.0;
  const auto tv = anvil::test::values_f64(t64);
  for (int r = 0; r < 4; ++r)
    expect -= ls.select(0, r).select(0, static_cast<std::int64_t>(tv[r])).item();
  CHECK(cross_entropy(logits.detach(), t64).item() == Approx(expect / 4).epsilon(1e-12));
  // The incoming gradient scales the result (loss * 3 before backward).
  ANVIL_CHECK_GRADCHECK("3 * cross_entropy",
                        [](const V& in) { return cross_entropy(in[0], in[1]) * 3.0; },
                        {logits, t64});
}

// ---- dropout
// ---------------------------------------------------------------------------------------

TEST_CASE("gradcheck: dropout with a re-seeded generator", "[gradcheck][dropout]") {
  // Re-seeding the generator inside the function makes every evaluation draw the same mask,
  // so dropout is an ordinary deterministic function of x there.
  auto gen = std::make_shared<Generator>();
  const double p = 0.4;
  TensorFn fn = [gen, p](const V& in) {
    gen->seed(1234);
    return dropout(in[0], p, true, gen.get());
  };
  Tensor x = uniform_leaf({6, 7}, -1, 1, 110);
  ANVIL_CHECK_GRADCHECK("dropout p=0.4", fn, {x});
  ANVIL_CHECK_GRADCHECK("dropout eval mode",
                        [](const V& in) { return dropout(in[0], 0.5, false) * 2.0; }, {x});
  ANVIL_CHECK_GRADCHECK("dropout p=0", [](const V& in) { return dropout(in[0], 0.0, true) * 2.0; },
                        {x});

  // Directly: with x = 1 the output IS mask * scale, and the gradient of sum(out) equals it.
  Tensor ones = Tensor::ones({2000}, DType::f64);
  ones.set_requires_grad(true);
  Generator g(99);
  Tensor out = dropout(ones, p, true, &g);
  sum(out).backward();
  const auto ov = anvil::test::values_f64(out), gv = anvil::test::values_f64(ones.grad());
  const double scale = 1.0 / (1.0 - p);
  std::int64_t zeros = 0, bad = 0;
  for (std::size_t i = 0; i < ov.size(); ++i) {
    if (ov[i] == 0.0)
      ++zeros;
    else if (std::fabs(ov[i] - scale) > 1e-12)
      ++bad;
    if (gv[i] != ov[i]) ++bad;
  }
  CHECK(bad == 0);
  const double frac = static_cast<double>(zeros) / static_cast<double>(ov.size());
  CHECK(frac == Approx(p).margin(0.05));  // 2000 draws: sd ~ 0.011
  // The same seed draws the same mask; another seed a different one.
  Generator g2(99), g3(100);
  CHECK(anvil::test::max_abs_diff(dropout(ones.detach(), p, true, &g2), out) == 0.0);
  CHECK(anvil::test::max_abs_diff(dropout(ones.detach(), p, true, &g3), out) > 0.0);
}

// ---- views and conversions
// -----------------------------------------------------------------------

TEST_CASE("gradcheck: differentiable views", "[gradcheck][views]") {
  Tensor x = uniform_leaf({2, 3, 4}, -1, 1, 120);
  ANVIL_CHECK_GRADCHECK("transpose", [](const V& in) { return in[0].transpose(0, 2); }, {x});
  ANVIL_CHECK_GRADCHECK("transpose negative dims",
                        [](const V& in) { return in[0].transpose(-1, -2); }, {x});
  ANVIL_CHECK_GRADCHECK("t", [](const V& in) { return in[0].t(); },
                        {uniform_leaf({3, 5}, -1, 1, 121)});
  ANVIL_CHECK_GRADCHECK("permute", [](const V& in) { return in[0].permute({2, 0, 1}); }, {x});
  ANVIL_CHECK_GRADCHECK("permute negative",
                        [](const V& in) {
                          return in[0].permute({-1, 0, -2});
                        },
                        {x});
  ANVIL_CHECK_GRADCHECK("reshape (view)", [](const V& in) { return in[0].reshape({6, -1}); }, {x});
  ANVIL_CHECK_GRADCHECK("reshape (copy)",
                        [](const V& in) {
                          return in[0].permute({2, 1, 0}).reshape({4, 6});
                        },
                        {x});
  ANVIL_CHECK_GRADCHECK("view", [](const V& in) { return in[0].view({3, 8}); }, {x});
  ANVIL_CHECK_GRADCHECK("view of a slice",
                        [](const V& in) {
                          return in[0].slice(1, 0, 2).view({2, 8});
                        },
                        {x});
  ANVIL_CHECK_GRADCHECK("slice", [](const V& in) { return in[0].slice(2, 1, 3); }, {x});
  ANVIL_CHECK_GRADCHECK("slice step 2", [](const V& in) { return in[0].slice(2, 0, 4, 2); }, {x});
  ANVIL_CHECK_GRADCHECK("slice negative bounds", [](const V& in) { return in[0].slice(1, -2, -1); },
                        {x});
  ANVIL_CHECK_GRADCHECK("select", [](const V& in) { return in[0].select(1, 2); }, {x});
  ANVIL_CHECK_GRADCHECK("select negative", [](const V& in) { return in[0].select(-1, -1); }, {x});
  ANVIL_CHECK_GRADCHECK("select to 0-D",
                        [](const V& in) { return in[0].select(0, 1).select(0, 2); },
                        {uniform_leaf({2, 3}, -1, 1, 122)});
  ANVIL_CHECK_GRADCHECK("expand",
                        [](const V& in) {
                          return in[0].expand({3, 4});
                        },
                        {uniform_leaf({3, 1}, -1, 1, 123)});
  ANVIL_CHECK_GRADCHECK("expand new leading dims",
                        [](const V& in) {
                          return in[0].expand({2, 3, 4});
                        },
                        {uniform_leaf({4}, -1, 1, 124)});
  ANVIL_CHECK_GRADCHECK("expand 0-D",
                        [](const V& in) {
                          return in[0].expand({2, 2});
                        },
                        {uniform_leaf({}, -1, 1, 125)});
  ANVIL_CHECK_GRADCHECK("unsqueeze", [](const V& in) { return in[0].unsqueeze(1); }, {x});
  ANVIL_CHECK_GRADCHECK("unsqueeze end", [](const V& in) { return in[0].unsqueeze(-1); }, {x});
  ANVIL_CHECK_GRADCHECK("squeeze", [](const V& in) { return in[0].squeeze(1); },
                        {uniform_leaf({3, 1, 2}, -1, 1, 126)});
  ANVIL_CHECK_GRADCHECK("flatten", [](const V& in) { return in[0].flatten(); }, {x});
  ANVIL_CHECK_GRADCHECK("flatten 1..2", [](const V& in) { return in[0].flatten(1, 2); }, {x});
  ANVIL_CHECK_GRADCHECK("flatten of a transpose",
                        [](const V& in) { return in[0].transpose(0, 1).flatten(1); }, {x});
  ANVIL_CHECK_GRADCHECK("contiguous",
                        [](const V& in) { return in[0].transpose(0, 1).contiguous(); }, {x});
  ANVIL_CHECK_GRADCHECK("contiguous (no-op)", [](const V& in) { return in[0].contiguous() * 2.0; },
                        {x});
  ANVIL_CHECK_GRADCHECK("clone", [](const V& in) { return in[0].clone(); }, {x});
  ANVIL_CHECK_GRADCHECK("clone of a view", [](const V& in) { return in[0].slice(0, 1, 2).clone(); },
                        {x});
  // Views of views, then arithmetic (gradients from several views of one leaf add up).
  ANVIL_CHECK_GRADCHECK("views combined",
                        [](const V& in) {
                          Tensor a = in[0].select(0, 0);      // [3,4]
                          Tensor b = in[0].select(0, 1).t();  // [4,3]
                          return a * b.t() + in[0].slice(0, 0, 1).squeeze(0) * 3.0;
                        },
                        {x});
}

TEST_CASE("gradcheck: dtype conversions", "[gradcheck][views]") {
  // Round trips through f32 lose precision, so a larger eps and a looser tolerance.
  GradcheckOptions loose;
  loose.eps = 1e-3;
  loose.atol = 1e-4;
  loose.rtol = 1e-3;
  Tensor x = uniform_leaf({3, 4}, -1, 1, 130);
  ANVIL_CHECK_GRADCHECK(
      "to(f32).to(f64)", [](const V& in) { return in[0].to(DType::f32).to(DType::f64); }, {x},
      loose);
  ANVIL_CHECK_GRADCHECK(
      "exp in f32", [](const V& in) { return exp(in[0].to(DType::f32)).to(DType::f64); }, {x},
      loose);
  ANVIL_CHECK_GRADCHECK("to(f64) is identity",
                        [](const V& in) { return in[0].to(DType::f64) * 2.0; }, {x});
  // The gradient of an f32 round trip arrives in the leaf's dtype.
  Tensor y = x.to(DType::f32);
  CHECK(y.dtype() == DType::f32);
  sum(y).backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == DType::f64);
}
