// SPDX-License-Identifier: Apache-2.0
// Pooling and batch norm: known values (from PyTorch 2.x, hard-coded), float64 gradient checks
// under every f64-capable variant, every registered variant against `ref` for every pass on a
// shared shape list (small odd cases + the models' real layer shapes), the running-statistics
// update, the nn modules and the error messages.
#include <catch2/catch.hpp>

#include <algorithm>
#include <variant>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/random.h"
#include "engine/dispatch/batch_norm_problem.h"
#include "engine/dispatch/pool_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/nn/batch_norm.h"
#include "engine/nn/layers.h"
#include "engine/nn/pooling.h"
#include "engine/ops/batch_norm.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/pool.h"
#include "helpers/gradcheck.h"
#include "helpers/pool_options.h"
#include "helpers/batch_norm_case.h"
#include "helpers/variant_harness.h"
#include "kernels/register.h"

using namespace anvil;
using anvil::test::values_f64;

namespace {

void check_values(const Tensor& got, const std::vector<double>& want, double tol = 1e-5) {
  const auto g = values_f64(got);
  REQUIRE(g.size() == want.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i);
    CHECK(g[i] == Approx(want[i]).margin(tol));
  }
}

}  // namespace

// ---- known values and shapes ----------------------------------------------------------------

TEST_CASE("pool output sizes follow the PyTorch ceil_mode rule", "[pool]") {
  CHECK(pool_output_size(5, 2, 2, 0, false) == 2);
  CHECK(pool_output_size(5, 2, 2, 0, true) == 3);
  CHECK(pool_output_size(5, 2, 2, 1, true) == 3);  // a 4th window would start in the padding
  CHECK(pool_output_size(6, 3, 2, 1, true) == 4);
  CHECK(pool_output_size(112, 3, 2, 1, false) == 56);
  CHECK(pool_output_size(55, 3, 2, 0, false) == 27);
  CHECK(pool_output_size(13, 3, 2, 0, false) == 6);
  CHECK(pool_output_size(13, 3, 2, 0, true) == 6);
  CHECK(pool_output_size(14, 3, 2, 0, true) == 7);
  Tensor x = Tensor::zeros({1, 1, 5, 5});
  CHECK(max_pool2d(x, test::pool_options(2, 2, 1, true)).sizes() == Shape{1, 1, 3, 3});
}

namespace {

// The first of f32, bf16, f16 that `name` of the max_pool2d table takes (the 16-bit variants
// take their own type only).
DType variant_dtype(const std::string& name) {
  for (const DType t : {DType::f32, DType::bf16, DType::f16}) {
    const PoolProblem p = make_pool_problem(PoolKind::max, {1, 1, 4, 4}, {2, 2}, {2, 2}, {0, 0},
                                            false, true, t, Device::cpu(), "test");
    const auto* v = max_pool2d_table().find(name);
    if (!v->supports || v->supports(p).ok) return t;
  }
  return DType::f32;
}

}  // namespace

TEST_CASE("pool known values match PyTorch", "[pool]") {
  register_builtin_kernels();
  for (const auto& v : max_pool2d_table().variants()) {
    INFO("variant " << v.name);
    // oneDNN 2.6 has no JIT bf16 pooling for one channel, so cpu.onednn.bf16 declines these
    // problems; the pooling driver loops check it on the layers (tests/test_op_drivers.cpp).
    if (v.name == "cpu.onednn.bf16") continue;
    // Each variant in its type: the inputs (integers up to 29) are exact in bf16 and f16, the
    // maxima too; averages round to the type (bf16: 8 bits, up to 0.0625 at 16..32).
    const DType dt = variant_dtype(v.name);
    const double tol = dt == DType::f32 ? 1e-5 : 0.07;
    const Tensor x = Tensor::arange(30.0).reshape({1, 1, 5, 6}).to(dt);
    ForceVariant f1("max_pool2d", v.name), f2("avg_pool2d", v.name),
        f3("adaptive_avg_pool2d", v.name);
    check_values(
        max_pool2d(Tensor::arange(16.0).reshape({1, 1, 4, 4}).to(dt), test::pool_options(2, 2)),
        {5, 7, 13, 15}, 0.0);
    check_values(max_pool2d(x, test::pool_options(3, 2, 1, true)),
                 {7, 9, 11, 11, 19, 21, 23, 23, 25, 27, 29, 29}, 0.0);
    check_values(avg_pool2d(x, test::pool_options(3, 2, 1, true, false)),
                 {3.5, 5, 7, 8, 12.5, 14, 16, 17, 21.5, 23, 25, 26}, tol);
    // include_pad with ceil_mode: oneDNN cannot (its divisor would be 9 in the last column).
    if (v.name != "cpu.onednn" && v.name != "cpu.onednn.bf16") {
      check_values(avg_pool2d(x, test::pool_options(3, 2, 1, true, true)),
                   {1.5555555820, 3.3333332538, 4.6666665077, 2.6666667461, 8.3333330154, 14.0,
                    16.0, 8.5, 9.5555553436, 15.3333330154, 16.6666660308, 8.6666669846},
                   tol);
      check_values(
          avg_pool2d(Tensor::ones({1, 1, 6, 6}).to(dt), test::pool_options(3, 2, 1, true)),
          {4 / 9., 6 / 9., 6 / 9., 3 / 9., 6 / 9., 1, 1, .5, 6 / 9., 1, 1, .5, 3 / 9., .5, .5, .25},
          tol);
      check_values(adaptive_avg_pool2d(x, {3, 4}),
                   {3.5, 4.5, 6.5, 7.5, 12.5, 13.5, 15.5, 16.5, 21.5, 22.5, 24.5, 25.5}, tol);
    }
  }
  Tensor g = global_avg_pool2d(Tensor::arange(24.0).reshape({2, 3, 2, 2}));
  CHECK(g.sizes() == Shape{2, 3});
  check_values(g, {1.5, 5.5, 9.5, 13.5, 17.5, 21.5});
}

// ---- gradient checks (float64) --------------------------------------------------------------

namespace {

// Runs body once per variant of `table` that supports f64 problem `p`; reports the others.
template <typename Table, typename Problem, typename Body>
void for_f64_variants(Table& table, const Problem& p, Body&& body) {
  register_builtin_kernels();
  const auto cands = table.candidates(p);
  for (const auto& c : cands) {
    if (!c.support.ok) {
      CHECK(!c.support.reason.empty());
      INFO("not gradient-checked (f64 unsupported): " << c.name << ": " << c.support.reason);
      continue;
    }
    ForceVariant force(table.op(), c.name);
    INFO("variant " << c.name);
    body(c.name);
  }
}

}  // namespace

TEST_CASE("max_pool2d float64 gradients", "[pool][gradcheck]") {
  struct G {
    Shape shape;
    Pool2dOptions o;
  };
  const std::vector<G> cases = {
      {{2, 2, 7, 9},
       test::pool_options(3, 2, 1, true)},       // padding, ceil_mode, overlapping windows, odd
      {{1, 3, 6, 5}, test::pool_options(2, 2)},  // plain, odd width drops a column
      {{1, 2, 5, 5}, test::pool_options(2, 2, 1, true)},  // last window dropped by the ceil rule
      {{2, 1, 6, 7},
       [] {
         Pool2dOptions o;
         o.kernel = {3, 2};
         o.stride = {1, 2};
         o.padding = {1, 1};
         return o;
       }()},
  };
  for (const auto& c : cases) {
    Tensor probe = Tensor::zeros(c.shape, DType::f64);
    const PoolProblem p = ops::pool2d_problem(PoolKind::max, probe, c.o.kernel, c.o.stride,
                                              c.o.padding, c.o.ceil_mode, true, "test");
    for_f64_variants(max_pool2d_table(), p, [&](const std::string&) {
      Tensor x = test::distinct_leaf(c.shape, 0.01, 11);
      ANVIL_CHECK_GRADCHECK(
          "max_pool2d", [&](const std::vector<Tensor>& in) { return max_pool2d(in[0], c.o); }, {x});
    });
  }
}

TEST_CASE("avg_pool2d float64 gradients", "[pool][gradcheck]") {
  for (bool include_pad : {true, false})
    for (const auto& o : {test::pool_options(3, 2, 1, true, include_pad),
                          test::pool_options(2, 2, 0, true, include_pad),
                          test::pool_options(3, 1, 1, false, include_pad)}) {
      const Shape shape{2, 2, 7, 6};
      const PoolProblem p =
          ops::pool2d_problem(PoolKind::avg, Tensor::zeros(shape, DType::f64), o.kernel, o.stride,
                              o.padding, o.ceil_mode, o.count_include_pad, "test");
      INFO(p.repr());
      for_f64_variants(avg_pool2d_table(), p, [&](const std::string&) {
        Tensor x = test::uniform_leaf(shape, -1, 1, 5);
        ANVIL_CHECK_GRADCHECK(
            "avg_pool2d", [&](const std::vector<Tensor>& in) { return avg_pool2d(in[0], o); }, {x});
      });
    }
}

TEST_CASE("adaptive and global average pooling float64 gradients", "[pool][gradcheck]") {
  struct A {
    Shape shape;
    std::array<std::int64_t, 2> out;
  };
  for (const A& c :
       std::vector<A>{{{2, 2, 7, 9}, {3, 4}}, {{1, 2, 2, 3}, {5, 7}}, {{1, 3, 6, 4}, {3, 2}}}) {
    const PoolProblem p =
        ops::adaptive_avg_pool2d_problem(Tensor::zeros(c.shape, DType::f64), c.out, "test");
    INFO(p.repr());
    for_f64_variants(adaptive_avg_pool2d_table(), p, [&](const std::string&) {
      Tensor x = test::uniform_leaf(c.shape, -1, 1, 6);
      ANVIL_CHECK_GRADCHECK(
          "adaptive_avg_pool2d",
          [&](const std::vector<Tensor>& in) { return adaptive_avg_pool2d(in[0], c.out); }, {x});
    });
  }
  Tensor x = test::uniform_leaf({2, 3, 3, 5}, -1, 1, 7);
  ANVIL_CHECK_GRADCHECK("global_avg_pool2d",
                        [](const std::vector<Tensor>& in) { return global_avg_pool2d(in[0]); },
                        {x});
}

TEST_CASE("batch_norm2d float64 gradients in training and eval mode", "[batch_norm][gradcheck]") {
  const Shape shape{3, 4, 3, 5};
  for (bool training : {true, false}) {
    const BatchNormProblem p =
        make_batch_norm_problem(shape, training, 0.1, 1e-5, DType::f64, Device::cpu(), "test");
    INFO((training ? "training" : "eval"));
    for_f64_variants(batch_norm2d_table(), p, [&](const std::string&) {
      Tensor x = test::uniform_leaf(shape, -2, 3, 21);
      Tensor w = test::uniform_leaf({4}, 0.5, 1.5, 22);
      Tensor b = test::uniform_leaf({4}, -1, 1, 23);
      Tensor rm = test::uniform_leaf({4}, -0.5, 0.5, 24, false);
      Tensor rv = test::uniform_leaf({4}, 0.5, 2.0, 25, false);
      ANVIL_CHECK_GRADCHECK("batch_norm2d",
                            [&](const std::vector<Tensor>& in) {
                              // Fresh running statistics each call: the function must be
                              // deterministic.
                              return batch_norm2d(in[0], in[1], in[2], rm.clone(), rv.clone(),
                                                  training, 0.1, 1e-5);
                            },
                            {x, w, b});
      // Without affine parameters (weight/bias undefined).
      Tensor x2 = test::uniform_leaf(shape, -2, 3, 26);
      ANVIL_CHECK_GRADCHECK("batch_norm2d (no affine)",
                            [&](const std::vector<Tensor>& in) {
                              return batch_norm2d(in[0], Tensor(), Tensor(), rm.clone(), rv.clone(),
                                                  training);
                            },
                            {x2});
    });
  }
}

// ---- every variant against ref ----------------------------------------------------------------
// Every pooling and batch-norm variant on every pass of the drivers' groups (odd shapes and the
// models' layers) against ref in f64 is the op drivers' loop (tests/test_op_drivers.cpp;
// harness/drivers/pool_driver.cpp, batch_norm_driver.cpp). Here: batch norm on data far from
// zero, where a one-pass variance loses the digits that the two-pass one keeps.

TEST_CASE("every batch-norm variant matches ref on data far from zero", "[batch_norm][variants]") {
  register_builtin_kernels();
  test::VariantHarness harness(batch_norm2d_table(), DeviceType::cpu, 1);
  harness.require_all();
  harness.skip_ref();  // ref is the oracle
  const Shape shape{2, 4, 9, 9};
  const std::int64_t C = shape[1];
  Generator gen(307);
  const Tensor x = ops::add_scalar(uniform(shape, -1, 3, DType::f32, &gen), 100.0);
  const Tensor w = uniform({C}, 0.5, 1.5, DType::f32, &gen),
               b = uniform({C}, -1, 1, DType::f32, &gen);
  const Tensor rm0 = uniform({C}, -0.5, 0.5, DType::f32, &gen),
               rv0 = uniform({C}, 0.5, 2, DType::f32, &gen);
  const Tensor dy = uniform(shape, -1, 1, DType::f32, &gen);
  test::BnOutputs ref;
  {
    ForceVariant force("batch_norm2d", "ref");
    ref = test::batch_norm_passes(x, w, b, rm0, rv0, dy, Device::cpu(), true);
  }
  const BatchNormProblem p =
      make_batch_norm_problem(shape, true, 0.1, 1e-5, DType::f32, Device::cpu(), "test");
  const std::vector<std::pair<std::string, BatchNormProblem>> passes = {
      {"training", p},
      {"inference", p.with_pass(BatchNormPass::forward_inference)},
      {"backward", p.with_pass(BatchNormPass::backward)}};
  constexpr double kTol = 1e-3;  // f32 input at 100 +- 2
  harness.run(batch_norm2d_table(), passes, "offset data", [&](const BatchNormTable::Variant&) {
    const test::BnOutputs o = test::batch_norm_passes(x, w, b, rm0, rv0, dy, Device::cpu(), true);
    return test::compare_scaled("y", o.y, ref.y, kTol) +
           test::compare_scaled("mean", o.mean, ref.mean, 1e-6) +
           test::compare_scaled("var", o.var, ref.var, 1e-5) +
           test::compare_scaled("dx", o.dx, ref.dx, kTol * 10) +
           test::compare_scaled("dw", o.dw, ref.dw, 1e-4) +
           test::compare_scaled("db", o.db, ref.db, 1e-5) +
           test::compare_scaled("eval y", o.y_eval, ref.y_eval, 1e-5) +
           test::compare_scaled("eval dx", o.dx_eval, ref.dx_eval, 1e-5);
  });
  CHECK(harness.finish() == 0);
}

TEST_CASE("unsupported variants give reasons", "[pool][variants]") {
  register_builtin_kernels();
  Tensor x = Tensor::zeros({1, 512, 1, 1});
  const PoolProblem p = ops::adaptive_avg_pool2d_problem(x, {7, 7}, "test");
  const auto* v = adaptive_avg_pool2d_table().find("cpu.onednn");
  REQUIRE(v != nullptr);
  const Support s = v->supports(p);
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.reason, Catch::Contains("H % OH == 0"));
  // Forcing it is an error naming the reason, never a silent fallback.
  ForceVariant force("adaptive_avg_pool2d", "cpu.onednn");
  CHECK_THROWS_WITH(adaptive_avg_pool2d(x, {7, 7}), Catch::Contains("H % OH == 0"));
  const PoolProblem f64 =
      ops::pool2d_problem(PoolKind::max, Tensor::zeros({1, 1, 4, 4}, DType::f64), {2, 2}, {2, 2},
                          {0, 0}, false, true, "test");
  CHECK_THAT(max_pool2d_table().find("cpu.onednn")->supports(f64).reason, Catch::Contains("f32"));
}

// ---- running statistics ------------------------------------------------------------------------

TEST_CASE("batch_norm2d updates running statistics as PyTorch", "[batch_norm]") {
  register_builtin_kernels();
  // x [2, 2, 1, 2]: channel 0 holds 1, 3 (n=0) and 5, 7 (n=1); channel 1 holds 2 everywhere.
  Tensor x = Tensor::from_vector(std::vector<double>{1, 3, 2, 2, 5, 7, 2, 2}, {2, 2, 1, 2});
  for (const auto& v : batch_norm2d_table().variants()) {
    for (DType dt : {DType::f64, DType::f32}) {
      const BatchNormProblem p =
          make_batch_norm_problem(x.sizes(), true, 0.1, 1e-5, dt, Device::cpu(), "test");
      if (v.supports && !v.supports(p).ok) continue;
      INFO("variant " << v.name << " " << dtype_name(dt));
      ForceVariant force("batch_norm2d", v.name);
      Tensor xt = x.to(dt);
      Tensor rm = Tensor::zeros({2}, dt), rv = Tensor::ones({2}, dt);
      Tensor w = Tensor::ones({2}, dt), b = Tensor::zeros({2}, dt);
      {
        NoGradGuard no_grad;  // the update happens whatever the grad mode
        Tensor y = batch_norm2d(xt, w, b, rm, rv, true, 0.1, 1e-5);
        // channel 0: mean 4, biased var 5, unbiased 20/3; channel 1: mean 2, var 0.
        const double s = std::sqrt(5.0 + 1e-5);
        check_values(y, {-3 / s, -1 / s, 0, 0, 1 / s, 3 / s, 0, 0}, 1e-5);
      }
      check_values(rm, {0.4, 0.2}, 1e-6);
      check_values(rv, {0.9 + 0.1 * 20.0 / 3.0, 0.9}, 1e-6);
      // A second step compounds: r = 0.9 r + 0.1 batch.
      batch_norm2d(xt, w, b, rm, rv, true, 0.1, 1e-5);
      check_values(rm, {0.9 * 0.4 + 0.4, 0.9 * 0.2 + 0.2}, 1e-6);
      check_values(rv, {0.9 * (0.9 + 0.1 * 20.0 / 3.0) + 0.1 * 20.0 / 3.0, 0.81}, 1e-6);
      // Eval mode reads them and changes nothing.
      const auto before = values_f64(rm);
      Tensor ye = batch_norm2d(xt, w, b, rm, rv, false, 0.1, 1e-5);
      CHECK(values_f64(rm) == before);
      const auto rmv = values_f64(rm), rvv = values_f64(rv);
      check_values(
          ye.select(1, 0).flatten(),
          {(1 - rmv[0]) / std::sqrt(rvv[0] + 1e-5), (3 - rmv[0]) / std::sqrt(rvv[0] + 1e-5),
           (5 - rmv[0]) / std::sqrt(rvv[0] + 1e-5), (7 - rmv[0]) / std::sqrt(rvv[0] + 1e-5)},
          1e-5);
      // Momentum 1 replaces; momentum 0 keeps.
      Tensor rm1 = Tensor::zeros({2}, dt), rv1 = Tensor::ones({2}, dt);
      batch_norm2d(xt, w, b, rm1, rv1, true, 1.0, 1e-5);
      check_values(rm1, {4, 2}, 1e-6);
      check_values(rv1, {20.0 / 3.0, 0}, 1e-5);
      batch_norm2d(xt, w, b, rm1, rv1, true, 0.0, 1e-5);
      check_values(rm1, {4, 2}, 1e-6);
    }
  }
  // Training without running statistics (PyTorch's track_running_stats=False) works.
  CHECK(batch_norm2d(x, Tensor(), Tensor(), Tensor(), Tensor(), true).sizes() == x.sizes());
}

// ---- nn modules --------------------------------------------------------------------------------

TEST_CASE("pooling modules: shapes flops problems", "[pool][nn]") {
  nn::MaxPool2d stem(test::pool_options(3, 2, 1));
  CHECK(stem.output_shape({16, 64, 112, 112}) == Shape{16, 64, 56, 56});
  CHECK(stem.forward_flops({1, 64, 112, 112}) == 64.0 * 56 * 56 * 9);
  CHECK(stem.extra_repr() == "kernel=[3,3], stride=[2,2], padding=[1,1], ceil_mode=false");
  nn::MaxPool2d vgg({.kernel = {2, 2}});
  CHECK(vgg.output_shape({1, 64, 224, 224}) == Shape{1, 64, 112, 112});
  nn::AvgPool2d avg(test::pool_options(3, 2, 1, true, false));
  CHECK(avg.output_shape({1, 3, 7, 7}) == Shape{1, 3, 4, 4});
  CHECK_THAT(avg.extra_repr(), Catch::Contains("count_include_pad=false"));
  nn::AdaptiveAvgPool2d ad({7, 7});
  CHECK(ad.output_shape({2, 512, 1, 1}) == Shape{2, 512, 7, 7});
  nn::GlobalAvgPool2d gap;
  CHECK(gap.output_shape({2, 2048, 7, 7}) == Shape{2, 2048});
  Tensor y = gap.forward(Tensor::ones({2, 8, 3, 3}));
  CHECK(y.sizes() == Shape{2, 8});

  nn::Sequential seq{std::make_shared<nn::MaxPool2d>(test::pool_options(3, 2, 1)),
                     std::make_shared<nn::BatchNorm2d>(64),
                     std::make_shared<nn::GlobalAvgPool2d>()};
  std::vector<nn::NamedProblem> probs;
  seq.problems({4, 64, 112, 112}, "net:", probs);
  REQUIRE(probs.size() == 3);
  CHECK(probs[0].name == "net:0");
  CHECK(std::string(op_name(probs[0].problem)) == "max_pool2d");
  const auto& mp = std::get<PoolProblem>(probs[0].problem);
  CHECK(mp.oh == 56);
  CHECK(mp.n == 4);
  CHECK(probs[1].name == "net:1");
  CHECK(std::string(op_name(probs[1].problem)) == "batch_norm2d");
  const auto& bp = std::get<BatchNormProblem>(probs[1].problem);
  CHECK(bp.h == 56);
  CHECK(bp.pass == BatchNormPass::forward_training);
  CHECK(std::string(op_name(probs[2].problem)) == "adaptive_avg_pool2d");
  CHECK(std::get<PoolProblem>(probs[2].problem).oh == 1);
  // Op names are table names.
  for (const auto& np : probs) CHECK(find_variant_table(op_name(np.problem)) != nullptr);
  CHECK(seq.output_shape({4, 64, 112, 112}) == Shape{4, 64});
}

TEST_CASE("BatchNorm2d module: parameters buffers modes", "[batch_norm][nn]") {
  nn::BatchNorm2d bn(3, 1e-3, 0.2);
  const auto params = bn.named_parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[0].first == "weight");
  CHECK(params[1].first == "bias");
  CHECK(values_f64(params[0].second) == std::vector<double>{1, 1, 1});
  CHECK(values_f64(params[1].second) == std::vector<double>{0, 0, 0});
  CHECK(params[0].second.requires_grad());
  const auto bufs = bn.named_buffers();
  REQUIRE(bufs.size() == 2);
  CHECK(bufs[0].first == "running_mean");
  CHECK(bufs[1].first == "running_var");
  CHECK(values_f64(bufs[1].second) == std::vector<double>{1, 1, 1});
  CHECK(bn.num_parameters() == 6);
  CHECK(bn.extra_repr() == "channels=3, eps=0.001, momentum=0.2");

  Generator g(3);
  Tensor x = uniform({4, 3, 5, 5}, 1, 3, DType::f32, &g);
  Tensor y = bn.forward(x);  // training: batch statistics, updates the buffers
  CHECK(y.sizes() == x.sizes());
  const auto rm = values_f64(bn.running_mean());
  for (double v : rm) CHECK(v > 0.2 * 1.5);  // 0.2 * mean(x) with mean ~ 2
  y.backward(Tensor::ones(y.sizes()));
  CHECK(bn.weight().grad().defined());
  CHECK(bn.bias().grad().defined());
  check_values(bn.bias().grad(), {100, 100, 100}, 1e-3);  // sum of ones over N*H*W
  bn.eval();
  const auto before = values_f64(bn.running_mean());
  Tensor ye = bn.forward(x);
  CHECK(values_f64(bn.running_mean()) == before);
  // Eval output uses the running statistics: not zero-mean per channel any more.
  std::vector<nn::NamedProblem> probs;
  bn.problems({4, 3, 5, 5}, "m:bn.", probs);
  REQUIRE(probs.size() == 1);
  CHECK(probs[0].name == "m:bn");
  CHECK(std::get<BatchNormProblem>(probs[0].problem).pass == BatchNormPass::forward_inference);
  CHECK_THROWS_WITH(bn.forward(Tensor::zeros({1, 4, 2, 2})), Catch::Contains("[N,3,H,W]"));
}

TEST_CASE("max pooling backward through the graph", "[pool]") {
  // A tiny end-to-end check: the gradient of sum(max_pool2d(x)) is 1 at each window's maximum.
  Tensor x = Tensor::from_vector(std::vector<float>{1, 9, 2, 3, 4, 5, 8, 6, 7, 0, 1, 2, 3, 4, 5, 6},
                                 {1, 1, 4, 4});
  x.set_requires_grad(true);
  for (const auto& v : max_pool2d_table().variants()) {
    INFO("variant " << v.name);
    if (v.name == "cpu.onednn.bf16") continue;  // declines one channel (as above)
    ForceVariant force("max_pool2d", v.name);
    x.mutable_grad() = Tensor();
    // A 16-bit variant pools x cast to its type (exact for these integers); the cast's
    // backward brings the gradient back to f32.
    Tensor y = max_pool2d(x.to(variant_dtype(v.name)), test::pool_options(2, 2));
    check_values(y, {9, 8, 7, 6});
    y.backward(Tensor::ones(y.sizes(), y.dtype()));
    check_values(x.grad(), {0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1});
  }
}

// ---- errors -----------------------------------------------------------------------------------

TEST_CASE("pooling rejects bad inputs with clear messages", "[pool][errors]") {
  Tensor x = Tensor::zeros({2, 3, 8, 8});
  CHECK_THROWS_WITH(max_pool2d(Tensor::zeros({3, 8, 8}), test::pool_options(2, 2)),
                    Catch::Contains("max_pool2d") &&
                        Catch::Contains("expected 4-D input (N,C,H,W), got [3,8,8]"));
  CHECK_THROWS_WITH(max_pool2d(Tensor::zeros({1, 1, 2, 2}), test::pool_options(3, 1)),
                    Catch::Contains("kernel [3,3] is larger than the padded input 2x2"));
  CHECK_THROWS_WITH(avg_pool2d(x, test::pool_options(3, 1, 2)),
                    Catch::Contains("avg_pool2d") &&
                        Catch::Contains("padding [2,2] must be at most half the kernel [3,3]"));
  CHECK_THROWS_WITH(max_pool2d(x, test::pool_options(0, 1)),
                    Catch::Contains("kernel must be positive"));
  CHECK_THROWS_WITH(max_pool2d(x, test::pool_options(2, -1)),
                    Catch::Contains("stride must be positive"));
  CHECK_THROWS_WITH(max_pool2d(Tensor::zeros({1, 1, 4, 4}, DType::i64), test::pool_options(2, 2)),
                    Catch::Contains("floating-point") && Catch::Contains("i64"));
  CHECK_THROWS_WITH(adaptive_avg_pool2d(x, {0, 3}),
                    Catch::Contains("output size must be positive"));
  CHECK_THROWS_WITH(global_avg_pool2d(Tensor::zeros({2, 3})),
                    Catch::Contains("global_avg_pool2d") && Catch::Contains("[2,3]"));
  CHECK_THROWS_WITH(nn::MaxPool2d(test::pool_options(2, 2, 2)),
                    Catch::Contains("MaxPool2d") && Catch::Contains("half the kernel"));
  // A stride of 0 means "the kernel".
  CHECK(max_pool2d(x,
                   [] {
                     Pool2dOptions o;
                     o.kernel = {2, 2};
                     return o;
                   }())
            .sizes() == Shape{2, 3, 4, 4});
}

TEST_CASE("batch_norm2d rejects bad inputs with clear messages", "[batch_norm][errors]") {
  Tensor x = Tensor::zeros({2, 3, 4, 4});
  Tensor c3 = Tensor::ones({3}), c4 = Tensor::ones({4});
  CHECK_THROWS_WITH(batch_norm2d(Tensor::zeros({2, 3, 4}), c3, c3, c3, c3, true),
                    Catch::Contains("batch_norm2d") &&
                        Catch::Contains("expected 4-D input (N,C,H,W), got [2,3,4]"));
  CHECK_THROWS_WITH(batch_norm2d(x, c4, c3, c3, c3, true),
                    Catch::Contains("weight has shape [4] but the input [2,3,4,4] has 3 channels"));
  CHECK_THROWS_WITH(batch_norm2d(x, c3, c4, c3, c3, true), Catch::Contains("bias has shape [4]"));
  CHECK_THROWS_WITH(batch_norm2d(x, c3, c3, c4, c3, false),
                    Catch::Contains("running_mean has shape [4]"));
  CHECK_THROWS_WITH(batch_norm2d(x, c3, c3, c3, c4, true),
                    Catch::Contains("running_var has shape [4]"));
  CHECK_THROWS_WITH(batch_norm2d(x, c3, c3, Tensor(), Tensor(), false),
                    Catch::Contains("eval mode needs running_mean and running_var"));
  CHECK_THROWS_WITH(batch_norm2d(Tensor::zeros({1, 3, 1, 1}), c3, c3, c3, c3, true),
                    Catch::Contains("more than 1 value per channel"));
  CHECK_THROWS_WITH(batch_norm2d(x, Tensor::ones({3}, DType::f64), c3, c3, c3, true),
                    Catch::Contains("dtype mismatch") && Catch::Contains("f64"));
  CHECK_THROWS_WITH(batch_norm2d(Tensor::zeros({2, 3, 4, 4}, DType::i32), Tensor(), Tensor(),
                                 Tensor(), Tensor(), true),
                    Catch::Contains("floating-point") && Catch::Contains("i32"));
  CHECK_THROWS_WITH(batch_norm2d(x, c3, c3, c3, c3, true, 0.1, 0.0),
                    Catch::Contains("eps must be positive"));
  CHECK_THROWS_WITH(nn::BatchNorm2d(0), Catch::Contains("channels must be positive"));
  // Eval mode with one value per channel is fine (no statistics are computed).
  CHECK(batch_norm2d(Tensor::zeros({1, 3, 1, 1}), c3, c3, c3, c3, false).sizes() ==
        Shape{1, 3, 1, 1});
}

TEST_CASE("default selection follows the documented order", "[pool][batch_norm][variants]") {
  register_builtin_kernels();
  // See Note [Pool default order]: adaptive pooling -> cpu.omp; batch norm -> cpu.omp first.
  const PoolProblem gap =
      make_adaptive_pool_problem({2, 2048, 7, 7}, {1, 1}, DType::f32, Device::cpu(), "test");
  CHECK(adaptive_avg_pool2d_table().select(gap).name == "cpu.omp");
  const BatchNormProblem bn =
      make_batch_norm_problem({2, 64, 56, 56}, true, 0.1, 1e-5, DType::f32, Device::cpu(), "test");
  CHECK(batch_norm2d_table().select(bn).name == "cpu.omp");
  // f64 never reaches cpu.onednn; forcing ref always works.
  const PoolProblem f64 = make_pool_problem(PoolKind::max, {1, 2, 9, 9}, {3, 3}, {2, 2}, {1, 1},
                                            false, true, DType::f64, Device::cpu(), "test");
  CHECK(max_pool2d_table().select(f64).name == "cpu.omp");
  // See Note [oneDNN max pooling and NaN]: f32 max pooling defaults to cpu.omp too; cpu.onednn
  // runs only when forced.
  const PoolProblem f32 = make_pool_problem(PoolKind::max, {2, 64, 56, 56}, {3, 3}, {2, 2}, {1, 1},
                                            false, true, DType::f32, Device::cpu(), "test");
  CHECK(max_pool2d_table().select(f32).name == "cpu.omp");
  {
    ForceVariant onednn("max_pool2d", "cpu.onednn");
    CHECK(max_pool2d_table().select(f32).name == "cpu.onednn");
  }
  ForceVariant force("max_pool2d", "ref");
  CHECK(max_pool2d_table().select(f64).name == "ref");
}

TEST_CASE("16-bit pooling selects oneDNN's JIT bf16 pooling or the named fallbacks",
          "[pool][variants][bf16]") {
  register_builtin_kernels();
  const auto problem = [](PoolKind kind, DType t) {
    return make_pool_problem(kind, {2, 64, 56, 56}, {3, 3}, {2, 2}, {1, 1}, false, true, t,
                             Device::cpu(), "test");
  };
  // Max pooling: oneDNN's bf16 max drops NaN as its f32 one does, so it is opt-in and the
  // plane-wise fallback is the default (Note [oneDNN bf16 pooling]).
  const PoolProblem max16 = problem(PoolKind::max, DType::bf16);
  CHECK(max_pool2d_table().find("cpu.onednn.bf16")->opt_in);
  CHECK(max_pool2d_table().select_uncached(max16).name == "cpu.bf16_via_f32");
  // Average pooling: oneDNN's JIT bf16 pooling where it has one (avx512_core), else the
  // fallback, with the reason naming the CPU or oneDNN's implementation.
  const PoolProblem avg16 = problem(PoolKind::avg, DType::bf16);
  const Support onednn = avg_pool2d_table().find("cpu.onednn.bf16")->supports(avg16);
  INFO("cpu.onednn.bf16: " << (onednn.ok ? "supported" : onednn.reason));
  CHECK(avg_pool2d_table().select_uncached(avg16).name ==
        (onednn.ok ? "cpu.onednn.bf16" : "cpu.bf16_via_f32"));
  if (!onednn.ok)
    CHECK((onednn.reason.find("this CPU") != std::string::npos ||
           onednn.reason.find("offers only") != std::string::npos));
  // Adaptive pooling as in f32 (Note [Pool default order]); f16 has only its fallback.
  const PoolProblem gap16 =
      make_adaptive_pool_problem({2, 2048, 7, 7}, {1, 1}, DType::bf16, Device::cpu(), "test");
  CHECK(adaptive_avg_pool2d_table().select_uncached(gap16).name == "cpu.bf16_via_f32");
  CHECK(max_pool2d_table().select_uncached(problem(PoolKind::max, DType::f16)).name ==
        "cpu.f16_via_f32");
  CHECK(avg_pool2d_table().select_uncached(problem(PoolKind::avg, DType::f16)).name ==
        "cpu.f16_via_f32");
  // The f32 variants name the type they take.
  CHECK_THAT(max_pool2d_table().find("cpu.omp")->supports(max16).reason,
             Catch::Contains("needs f32 or f64, got bf16"));
  CHECK_THAT(avg_pool2d_table().find("cpu.onednn")->supports(avg16).reason,
             Catch::Contains("f32 only, not bf16"));
}

// Run by ctest as pool_bf16_below_avx512_core, with ONEDNN_MAX_CPU_ISA=AVX2: oneDNN then has no
// JIT bf16 pooling, as on a CPU without avx512_core (tests/CMakeLists.txt).
TEST_CASE("bf16 pooling below avx512_core runs the named fallback", "[.][pool][bf16][isa]") {
  const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA");
  REQUIRE(isa != nullptr);
  REQUIRE(std::string(isa) == "AVX2");
  register_builtin_kernels();
  Generator g(5);
  const Tensor x = uniform({2, 8, 13, 11}, -1.0, 1.0, DType::f32, &g).to(DType::bf16);
  const PoolProblem p =
      ops::pool2d_problem(PoolKind::avg, x, {3, 3}, {2, 2}, {1, 1}, false, true, "test");
  const Support s = avg_pool2d_table().find("cpu.onednn.bf16")->supports(p);
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.reason, Catch::Contains("needs avx512_core; this CPU lacks it"));
  CHECK(avg_pool2d_table().select_uncached(p).name == "cpu.bf16_via_f32");
  // It runs, and matches ref (f32 sums rounded once: within one bf16 rounding of |y| <= 1).
  const Tensor y = avg_pool2d(x, test::pool_options(3, 2, 1));
  REQUIRE(y.dtype() == DType::bf16);
  ForceVariant force("avg_pool2d", "ref");
  const Tensor want = avg_pool2d(x, test::pool_options(3, 2, 1));
  check_values(y, values_f64(want), 1.0 / 256);
}
