// SPDX-License-Identifier: Apache-2.0
// Adam and AdamW count steps per parameter, as PyTorch's state['step'] (Note [Per-parameter Adam
// steps] in engine/optim/adam.cpp): a parameter without a gradient in a step, or in a group added
// later with add_param_group, is bias-corrected with its own count. Checked in f64 against
// torch.optim.Adam's / AdamW's documented update written out by hand, through a checkpoint
// (the counts saved and restored, and a checkpoint from before them), and the refusals.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "anvil/anvil.h"
#include "helpers/f64_steps.h"

using namespace anvil;
using test::f64_tensor;
using test::f64_values;
using test::step_gradient;

namespace {

// torch.optim.Adam / AdamW for one parameter, its own t: with decoupled (AdamW)
// p <- p (1 - lr wd) first; otherwise (Adam) g <- g + wd p. Then
//   m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2;  t <- t + 1
//   p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
struct Reference {
  double lr, b1, b2, eps, wd;
  bool decoupled;
  std::vector<double> p, m, v;
  int t = 0;
  void step(std::vector<double> g) {
    ++t;
    const double c1 = 1 - std::pow(b1, t), c2 = 1 - std::pow(b2, t);
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (decoupled)
        p[i] *= 1 - lr * wd;
      else
        g[i] += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      p[i] -= lr / c1 * m[i] / (std::sqrt(v[i]) / std::sqrt(c2) + eps);
    }
  }
};

Reference reference_of(const std::vector<double>& p0, const optim::AdamOptions& o, bool decoupled) {
  return {o.lr,
          o.beta1,
          o.beta2,
          o.eps,
          o.weight_decay,
          decoupled,
          p0,
          std::vector<double>(p0.size()),
          std::vector<double>(p0.size())};
}

// Largest |got - want| / (|want| + lr) over the elements.
double error(const Tensor& got, const Reference& want) {
  return test::max_relative_error(got, want.p, want.lr);
}

}  // namespace

TEST_CASE("a parameter without a gradient in a step keeps its own Adam step count",
          "[optim][adam][param_steps]") {
  const std::string variant = GENERATE("cpu.omp", "ref");
  ForceVariant force("adam_update", variant);
  const bool decoupled = GENERATE(false, true);
  INFO("variant " << variant << (decoupled ? " AdamW" : " Adam"));
  const optim::AdamOptions o{
      .lr = 0.05, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};
  const std::vector<double> a0{0.5, -1.25, 2.0}, b0{-0.75, 0.125};
  Tensor a = f64_tensor(a0), b = f64_tensor(b0);
  std::unique_ptr<optim::AdamBase> opt;
  if (decoupled)
    opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{a, b},
                                         optim::AdamWOptions{.lr = o.lr,
                                                             .beta1 = o.beta1,
                                                             .beta2 = o.beta2,
                                                             .eps = o.eps,
                                                             .weight_decay = o.weight_decay});
  else
    opt = std::make_unique<optim::Adam>(std::vector<Tensor>{a, b}, o);
  Reference ra = reference_of(a0, o, decoupled), rb = reference_of(b0, o, decoupled);

  // b gets a gradient in steps 1, 4 and 5 only: its t runs 1, 2, 3 while a's runs 1 to 5.
  for (int step = 1; step <= 5; ++step) {
    const bool b_has_grad = step == 1 || step >= 4;
    a.mutable_grad() = f64_tensor(step_gradient(3, step, 0));
    b.mutable_grad() = b_has_grad ? f64_tensor(step_gradient(2, step, 1)) : Tensor();
    opt->step();
    ra.step(step_gradient(3, step, 0));
    if (b_has_grad) rb.step(step_gradient(2, step, 1));
    CHECK(error(a, ra) < 1e-13);
    CHECK(error(b, rb) < 1e-13);
  }
  CHECK(opt->steps() == 5);
  CHECK(opt->param_steps(0) == 5);
  CHECK(opt->param_steps(1) == 3);
  // With one global count, b's last update would have been corrected as step 5, not 3.
  Reference global = reference_of(b0, o, decoupled);
  global.step(step_gradient(2, 1, 1));
  global.t = 3;
  global.step(step_gradient(2, 4, 1));
  global.step(step_gradient(2, 5, 1));
  CHECK(error(b, global) > 1e-4);
  CHECK_THROWS_WITH(opt->param_steps(2), Catch::Contains("param_steps") && Catch::Contains("2"));
}

TEST_CASE("a group added with add_param_group counts its steps from 0",
          "[optim][adam][param_steps]") {
  const optim::AdamWOptions defaults{.lr = 0.02, .weight_decay = 0.05};
  const std::vector<double> a0{1.0, -2.0}, c0{0.25, 0.5, -0.5};
  Tensor a = f64_tensor(a0), c = f64_tensor(c0);
  optim::AdamW opt({a}, defaults);
  const optim::AdamOptions od{.lr = defaults.lr, .weight_decay = defaults.weight_decay};
  const optim::AdamOptions oc{.lr = 0.1, .beta1 = 0.5, .weight_decay = 0.0};
  Reference ra = reference_of(a0, od, true), rc = reference_of(c0, oc, true);
  for (int step = 1; step <= 4; ++step) {
    if (step == 3) {
      opt.add_param_group(
          {.params = {c},
           .options = optim::AdamWOptions{.lr = oc.lr, .beta1 = oc.beta1, .weight_decay = 0}});
      REQUIRE(opt.num_groups() == 2);
      REQUIRE(opt.params().size() == 2);
      REQUIRE(opt.param_steps(1) == 0);
    }
    a.mutable_grad() = f64_tensor(step_gradient(2, step, 0));
    ra.step(step_gradient(2, step, 0));
    if (step >= 3) {
      c.mutable_grad() = f64_tensor(step_gradient(3, step, 2));
      rc.step(step_gradient(3, step, 2));
    }
    opt.step();
    CHECK(error(a, ra) < 1e-13);
    CHECK(error(c, rc) < 1e-13);
  }
  CHECK(opt.param_steps(0) == 4);
  CHECK(opt.param_steps(1) == 2);
  CHECK(opt.group_options(1).lr == 0.1);

  // A group without options takes the constructor's defaults.
  Tensor d = f64_tensor({3.0});
  opt.add_param_group({.params = {d}});
  CHECK(opt.group_options(2).weight_decay == 0.05);
  CHECK(opt.group_options(2).lr == 0.02);
}

TEST_CASE("add_param_group refuses a parameter already in a group and changes nothing",
          "[optim][adam][param_steps]") {
  Tensor a = f64_tensor({1.0, 2.0});
  optim::Adam opt({a}, {});
  CHECK_THROWS_WITH(
      opt.add_param_group({.params = {Tensor(f64_tensor({0.0})), a}}),
      Catch::Contains("Adam::add_param_group") && Catch::Contains("already in a group"));
  CHECK(opt.num_groups() == 1);
  CHECK(opt.params().size() == 1);
  CHECK_THROWS_WITH(opt.add_param_group({.params = {f64_tensor({0.0})},
                                         .options = optim::AdamOptions{.beta1 = 1.5}}),
                    Catch::Contains("Adam::add_param_group") && Catch::Contains("betas"));
  CHECK(opt.num_groups() == 1);
}

TEST_CASE("a scheduler built before add_param_group refuses to step",
          "[optim][adam][param_steps]") {
  Tensor a = f64_tensor({1.0});
  optim::Adam opt({a}, {.lr = 0.1});
  optim::StepLR sched(opt, 2);
  opt.add_param_group({.params = {f64_tensor({2.0})}});
  CHECK_THROWS_WITH(sched.step(), Catch::Contains("StepLR::step") &&
                                      Catch::Contains("built for 1 parameter groups") &&
                                      Catch::Contains("now has 2"));
}

TEST_CASE("per-parameter Adam step counts go through a checkpoint",
          "[optim][adam][param_steps][checkpoint]") {
  const std::vector<double> a0{0.5, -1.0}, b0{2.0};
  auto run_steps = [&](Tensor& a, Tensor& b, optim::Adam& opt, int from, int to) {
    for (int step = from; step <= to; ++step) {
      a.mutable_grad() = f64_tensor(step_gradient(2, step, 0));
      b.mutable_grad() = step % 2 == 0 ? f64_tensor(step_gradient(1, step, 1)) : Tensor();
      opt.step();
    }
  };
  // Uninterrupted: steps 1-6 (b has a gradient in 2, 4 and 6).
  Tensor a = f64_tensor(a0), b = f64_tensor(b0);
  optim::Adam opt({a, b}, {.lr = 0.03});
  run_steps(a, b, opt, 1, 3);
  const auto md = opt.state_metadata();
  CHECK(md.at("step") == "3");
  CHECK(md.at("adam.step.0") == "3");
  CHECK(md.at("adam.step.1") == "1");
  std::vector<std::pair<std::string, Tensor>> saved;
  for (const auto& [name, t] : opt.state()) saved.emplace_back(name, t.clone());
  const std::vector<double> a3 = f64_values(a), b3 = f64_values(b);
  run_steps(a, b, opt, 4, 6);

  // Resumed from the state after step 3: the same values, bit for bit.
  Tensor ra = f64_tensor(a3), rb = f64_tensor(b3);
  optim::Adam resumed({ra, rb}, {.lr = 0.03});
  resumed.load_state(saved, md);
  CHECK(resumed.param_steps(0) == 3);
  CHECK(resumed.param_steps(1) == 1);
  run_steps(ra, rb, resumed, 4, 6);
  CHECK(f64_values(ra) == f64_values(a));
  CHECK(f64_values(rb) == f64_values(b));

  // A checkpoint from before the per-parameter counts: every parameter with state takes "step".
  auto old_md = md;
  old_md.erase("adam.step.0");
  old_md.erase("adam.step.1");
  optim::Adam old({f64_tensor(a3), f64_tensor(b3)}, {.lr = 0.03});
  old.load_state(saved, old_md);
  CHECK(old.param_steps(0) == 3);
  CHECK(old.param_steps(1) == 3);

  // Counts that cannot be: above the global step, or missing for a parameter with state.
  auto bad = md;
  bad["adam.step.1"] = "4";
  CHECK_THROWS_WITH(old.load_state(saved, bad),
                    Catch::Contains("adam.step.1") && Catch::Contains("[1, step = 3]"));
  bad = md;
  bad.erase("adam.step.1");
  CHECK_THROWS_WITH(old.load_state(saved, bad),
                    Catch::Contains("parameter 1") && Catch::Contains("adam.step.1"));
  CHECK(old.param_steps(1) == 3);  // a refused state changes nothing
}
