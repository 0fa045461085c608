// SPDX-License-Identifier: Apache-2.0
// The optimizer tables (sgd_update, adam_update, grad_norm, grad_scale) and the dropout table on
// the CPU beyond the driver loop: the tables' order, SGD from the momentum buffer's creation
// (with nesterov) and grad_scale's found_inf against `ref`, ref's squared norm, the optimizer
// classes through the tables, the Philox stream against its published known answers, and the
// CPU default dropout mask unchanged from the mt19937_64 draw it always was.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/autograd/functions.h"
#include "engine/core/random.h"
#include "engine/dispatch/dropout_problem.h"
#include "engine/dispatch/optimizer_problem.h"
#include "engine/optim/optimizer.h"
#include "helpers/gradcheck.h"
#include "helpers/optimizer_cases.h"
#include "helpers/variant_harness.h"
#include "kernels/dropout_philox.h"
#include "kernels/register.h"

using namespace anvil;
using Catch::Matchers::Contains;

namespace {

double sum_sq(const Tensor& t) {
  const Tensor d = t.to(DType::f64).contiguous();
  double s = 0;
  const double* p = d.data<double>();
  for (std::int64_t i = 0; i < d.numel(); ++i) s += p[i] * p[i];
  return s;
}

}  // namespace

TEST_CASE("optimizer tables list cpu.omp before ref", "[optim][variants]") {
  register_builtin_kernels();
  for (OptimOp op : {OptimOp::sgd, OptimOp::adam, OptimOp::grad_norm, OptimOp::grad_scale}) {
    OptimizerTable& t = optimizer_table(op);
    INFO(t.op());
    REQUIRE(t.variants().size() >= 2);
    CHECK(t.variants().back().name == "ref");
    OptimizerProblem p;
    p.op = op;
    CHECK(t.select(p).name == "cpu.omp");
    p.dtype = DType::i64;
    CHECK_THROWS_WITH(t.select(p), Contains("needs f32 or f64"));
  }
  CHECK(find_variant_table("sgd_update") == &sgd_update_table());
  CHECK(find_variant_table("dropout") == &dropout_table());
}

// Every variant against ref on one step of each problem is the driver loop's
// (harness/drivers/optimizer_driver.cpp); what its problems do not name stays here
// (tests/helpers/optimizer_cases.h): SGD's momentum buffer created on the first step, then
// blended, with and without nesterov; ref's squared norm against the sum of squares; grad_scale
// bit for bit and its found_inf flag.
TEST_CASE("sgd_update: cpu.omp matches ref from the buffer's creation on", "[optim][variants]") {
  register_builtin_kernels();
  const DType dtype = GENERATE(DType::f32, DType::f64);
  const std::vector<SgdHyper> cases = {
      {0.05, 0.9, 0.0, 0.0, false},   // momentum
      {0.05, 0.9, 0.0, 0.001, true},  // nesterov
  };
  const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
  test::VariantHarness harness(sgd_update_table(), DeviceType::cpu, static_cast<int>(cases.size()));
  for (const auto& h : cases)
    anvil::test::check_sgd_variants(harness, dtype, Device::cpu(), h, tol, 3);
  harness.finish();
}

TEST_CASE("grad_norm's ref and grad_scale: cpu.omp matches ref", "[optim][variants]") {
  register_builtin_kernels();
  const DType dtype = GENERATE(DType::f32, DType::f64);
  // ref's squared norm is the sum of the squared gradients.
  const anvil::test::TensorList a = anvil::test::make_list(dtype, 7);
  auto ea = a.entries(false);
  double ra = -1;
  OptimizerArgs na = anvil::test::args_for(OptimOp::grad_norm, dtype, Device::cpu(), ea);
  na.result = &ra;
  anvil::test::variant(grad_norm_table(), "ref").fn(na);
  double expect = 0;
  for (const auto& g : a.g) expect += sum_sq(g);
  CHECK(ra == Approx(expect).epsilon(1e-10));
  test::VariantHarness scale(grad_scale_table(), DeviceType::cpu, 1);
  anvil::test::check_grad_scale_variants(scale, dtype, Device::cpu(), 7);
  scale.finish();
}

TEST_CASE("SGD and clip_grad_norm_ dispatch through the tables", "[optim][variants]") {
  Generator gen(11);
  auto make = [&] {
    std::vector<Tensor> ps;
    for (std::int64_t n : {3, 500, 20000}) {
      Tensor p = normal({n}, 0, 1, DType::f32, &gen);
      p.set_requires_grad(true);
      ps.push_back(p);
    }
    return ps;
  };
  std::vector<Tensor> a = make();
  std::vector<Tensor> b;
  for (const auto& p : a) {
    Tensor c = p.detach().clone();
    c.set_requires_grad(true);
    b.push_back(c);
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    Tensor g = normal(a[i].sizes(), 0, 3, DType::f32, &gen);
    a[i].mutable_grad() = g.clone();
    b[i].mutable_grad() = g.clone();
  }
  const double na = optim::clip_grad_norm_(a, 1.0);
  double nb = 0;
  {
    ForceVariant f1("grad_norm", "ref"), f2("grad_scale", "ref");
    nb = optim::clip_grad_norm_(b, 1.0);
  }
  CHECK(na == Approx(nb).epsilon(1e-9));
  CHECK(na > 1.0);
  double after = 0;
  for (const auto& p : a) after += sum_sq(p.grad());
  CHECK(std::sqrt(after) == Approx(1.0).epsilon(1e-4));

  optim::SGD sa(a, optim::SGDOptions{0.1, 0.9, 0.0, 0.0, true});
  optim::SGD sb(b, optim::SGDOptions{0.1, 0.9, 0.0, 0.0, true});
  for (int step = 0; step < 2; ++step) {
    sa.step();
    ForceVariant f("sgd_update", "ref");
    sb.step();
  }
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(test::max_abs_diff(a[i], b[i]) <= 1e-6);

  // A forced variant that cannot run the problem is an error naming it, never a fallback.
  ForceVariant f("sgd_update", "cuda.custom.sgd");
  CHECK_THROWS(sa.step());
}

TEST_CASE("Philox4x32-10 reproduces the Random123 known answers", "[dropout]") {
  using kernels::philox4x32_10;
  const auto z = philox4x32_10(0, 0, 0, 0, 0, 0);
  CHECK(z.x[0] == 0x6627e8d5u);
  CHECK(z.x[1] == 0xe169c58du);
  CHECK(z.x[2] == 0xbc57ac4cu);
  CHECK(z.x[3] == 0x9b00dbd8u);
  const auto f = philox4x32_10(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  CHECK(f.x[0] == 0x408f276du);
  CHECK(f.x[3] == 0x6d5451fdu);
  const auto pi =
      philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
  CHECK(pi.x[0] == 0xd16cfe09u);
  CHECK(pi.x[1] == 0x94fdccebu);
  CHECK(pi.x[2] == 0x5001e420u);
  CHECK(pi.x[3] == 0x24126ea1u);
}

TEST_CASE("dropout on the CPU keeps its mt19937_64 mask by default", "[dropout]") {
  Generator gen(42), copy(42);
  Tensor x = Tensor::ones({1000});
  Tensor y = dropout(x, 0.3, true, &gen);
  // The mask dropout always drew: one Bernoulli(0.7) per element from the generator's engine.
  std::bernoulli_distribution keep(0.7);
  const float scale = static_cast<float>(1.0 / 0.7);
  const float* py = y.data<float>();
  int mismatches = 0;
  for (int i = 0; i < 1000; ++i) mismatches += py[i] != (keep(copy.engine()) ? scale : 0.0f);
  CHECK(mismatches == 0);
  CHECK(gen.next() == copy.next());  // the same number of draws
}

TEST_CASE("dropout ref (Philox) is reproducible and keeps about 1-p", "[dropout]") {
  ForceVariant f("dropout", "ref");
  const double p = GENERATE(0.2, 0.5);
  Generator g1(7), g2(7);
  Tensor x = normal({10, 1001}, 0, 1, DType::f32, &g1);
  x = x.detach();
  Generator h1(9), h2(9);
  Tensor y1 = dropout(x, p, true, &h1);
  Tensor y2 = dropout(x, p, true, &h2);
  CHECK(test::max_abs_diff(y1, y2) == 0.0);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  std::int64_t kept = 0;
  const float* px = x.data<float>();
  const float* py = y1.data<float>();
  bool values_ok = true;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    if (py[i] != 0.0f) {
      ++kept;
      values_ok = values_ok && py[i] == px[i] * scale;
    }
  }
  CHECK(values_ok);
  const double frac = static_cast<double>(kept) / static_cast<double>(x.numel());
  CHECK(frac == Approx(1.0 - p).margin(0.02));
  // The next call draws a new seed: a different mask.
  Tensor y3 = dropout(x, p, true, &h1);
  CHECK(test::max_abs_diff(y1, y3) > 0.0);
  // Gradient: the same mask.
  Tensor xr = x.clone();
  xr.set_requires_grad(true);
  Generator h3(9);
  Tensor y4 = dropout(xr, p, true, &h3);
  sum(y4).backward();
  const float* gx = xr.grad().data<float>();
  bool grad_ok = true;
  for (std::int64_t i = 0; i < x.numel(); ++i)
    grad_ok = grad_ok && gx[i] == (py[i] != 0.0f ? scale : 0.0f);
  CHECK(grad_ok);
}

TEST_CASE("dropout_keep_threshold", "[dropout]") {
  CHECK(dropout_keep_threshold(0.0) == (std::uint64_t{1} << 32));
  CHECK(dropout_keep_threshold(0.5) == (std::uint64_t{1} << 31));
  CHECK(dropout_keep_threshold(0.75) == (std::uint64_t{1} << 30));
  CHECK_THROWS_WITH(dropout_keep_threshold(1.0), Contains("[0, 1)"));
}
