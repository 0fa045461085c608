// SPDX-License-Identifier: Apache-2.0
// Learning-rate schedulers (engine/optim/lr_scheduler.h): the lr sequences of StepLR,
// MultiStepLR, CosineAnnealingLR and LinearWarmup (alone and around a cosine) against numbers
// worked out by hand from PyTorch's documented formulas, on every parameter group; their state
// round trip and its refusals.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "anvil/anvil.h"

using namespace anvil;

namespace {

// `steps` + 1 lrs of group g: after construction, then after each step().
std::vector<double> sequence(optim::LRScheduler& s, const optim::Optimizer& opt, int steps,
                             std::size_t g = 0) {
  std::vector<double> out = {opt.group_lr(g)};
  for (int i = 0; i < steps; ++i) {
    s.step();
    CHECK(s.last_lr().at(g) == opt.group_lr(g));
    out.push_back(opt.group_lr(g));
  }
  return out;
}

void check_sequence(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t t = 0; t < want.size(); ++t) {
    INFO("step " << t);
    CHECK(got[t] == Approx(want[t]).epsilon(1e-12).margin(1e-15));
  }
}

optim::SGD two_groups(double lr0, double lr1) {
  using G = optim::ParamGroup<optim::SGDOptions>;
  return optim::SGD(
      std::vector<G>{{.params = {Tensor::zeros({2})}},
                     {.params = {Tensor::zeros({3})}, .options = optim::SGDOptions{.lr = lr1}}},
      optim::SGDOptions{.lr = lr0});
}

}  // namespace

TEST_CASE("StepLR: lr * gamma^floor(t / step_size) on every group", "[optim][scheduler]") {
  optim::SGD opt = two_groups(0.1, 0.03);
  optim::StepLR s(opt, 3, 0.5);
  CHECK(opt.group_lr(1) == 0.03);
  check_sequence(sequence(s, opt, 7), {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025});
  CHECK(s.last_step() == 7);
  CHECK(opt.group_lr(1) == Approx(0.0075).epsilon(1e-12));  // 0.03 * 0.5^2
  CHECK(s.base_lrs() == std::vector<double>{0.1, 0.03});
}

TEST_CASE("MultiStepLR: lr * gamma^(milestones reached), any order, repeats decay twice",
          "[optim][scheduler]") {
  optim::SGD opt = two_groups(0.1, 0.04);
  optim::MultiStepLR s(opt, {5, 2, 5}, 0.5);  // sorted: 2, 5, 5
  CHECK(s.milestones() == std::vector<std::int64_t>{2, 5, 5});
  check_sequence(sequence(s, opt, 7), {0.1, 0.1, 0.05, 0.05, 0.05, 0.0125, 0.0125, 0.0125});
  CHECK(opt.group_lr(1) == Approx(0.005).epsilon(1e-12));  // 0.04 * 0.5^3

  const auto md = s.state_metadata();
  CHECK(md.at("milestones") == "2,5,5");
  optim::SGD other = two_groups(0.1, 0.04);
  optim::MultiStepLR t(other, {1}, 0.9);
  t.load_state(md);
  CHECK(t.milestones() == s.milestones());
  CHECK(t.gamma() == 0.5);
  CHECK(t.last_lr() == s.last_lr());
  for (const char* text : {"", "2,,5", "2,x", "0,3", "5,2"}) {
    INFO("milestones '" << text << "'");
    auto bad = md;
    bad["milestones"] = std::string(text);
    CHECK_THROWS_WITH(t.load_state(bad), Catch::Contains("MultiStepLR"));
    CHECK(t.milestones() == s.milestones());  // unchanged
  }
  CHECK_THROWS_WITH(optim::MultiStepLR(opt, {}), Catch::Contains("needs 1 to 1024 milestones"));
  CHECK_THROWS_WITH(optim::MultiStepLR(opt, {3, 0}),
                    Catch::Contains("a milestone must be >= 1, got 0"));
  CHECK_THROWS_WITH(optim::MultiStepLR(opt, {3}, 0.0), Catch::Contains("gamma must be positive"));
}

TEST_CASE("CosineAnnealingLR: eta_min + (base - eta_min)(1 + cos(pi t / T)) / 2",
          "[optim][scheduler]") {
  optim::SGD opt(std::vector<Tensor>{Tensor::zeros({2})}, 0.1);
  optim::CosineAnnealingLR s(opt, 4, 0.001);
  // cos(pi/4) = 0.70710678118654752: (1 + c) / 2 = 0.85355339059327376, (1 - c) / 2 =
  // 0.14644660940672624; 0.001 + 0.099 x those.
  check_sequence(sequence(s, opt, 4),
                 {0.1, 0.0855017856687341, 0.0505, 0.015498214331265896, 0.001});
}

TEST_CASE("LinearWarmup: LinearLR's factor, alone and around a cosine", "[optim][scheduler]") {
  SECTION("alone: start 0.25 over 4 steps, then the base lr") {
    optim::SGD opt(std::vector<Tensor>{Tensor::zeros({2})}, 0.1);
    optim::LinearWarmup s(opt, 4, 0.25);
    check_sequence(sequence(s, opt, 6), {0.025, 0.04375, 0.0625, 0.08125, 0.1, 0.1, 0.1});
  }
  SECTION("around CosineAnnealingLR(T = 4): factor x cosine, both groups") {
    optim::SGD opt = two_groups(0.2, 0.02);
    auto cosine = std::make_unique<optim::CosineAnnealingLR>(opt, 4);
    optim::LinearWarmup s(opt, 2, 0.5, std::move(cosine));
    // factors 0.5, 0.75, 1, 1, 1 times 1, 0.85355339059327376, 0.5, 0.14644660940672624, 0.
    check_sequence(sequence(s, opt, 4), {0.1, 0.12803300858899108, 0.1, 0.029289321881345243, 0.0});
    CHECK(s.last_lr()[1] == 0.0);
  }
}

TEST_CASE("schedulers refuse bad options naming them", "[optim][scheduler]") {
  optim::SGD opt(std::vector<Tensor>{Tensor::zeros({2})}, 0.1);
  CHECK_THROWS_WITH(optim::StepLR(opt, 0), Catch::Contains("step_size must be >= 1, got 0"));
  CHECK_THROWS_WITH(optim::StepLR(opt, 2, -0.5), Catch::Contains("gamma must be positive"));
  CHECK_THROWS_WITH(optim::CosineAnnealingLR(opt, -3),
                    Catch::Contains("t_max must be >= 1, got -3"));
  CHECK_THROWS_WITH(optim::LinearWarmup(opt, 5, 0.0),
                    Catch::Contains("start_factor must be in (0, 1]"));
  optim::SGD other(std::vector<Tensor>{Tensor::zeros({2})}, 0.1);
  CHECK_THROWS_WITH(optim::LinearWarmup(opt, 5, 0.5, std::make_unique<optim::StepLR>(other, 2)),
                    Catch::Contains("built on another optimizer"));
}

TEST_CASE("scheduler state round-trips and mismatches are refused", "[optim][scheduler]") {
  optim::SGD a = two_groups(0.2, 0.05);
  optim::LinearWarmup sa(a, 3, 0.1, std::make_unique<optim::CosineAnnealingLR>(a, 10, 0.01));
  for (int i = 0; i < 5; ++i) sa.step();
  const auto md = sa.state_metadata();
  CHECK(md.at("type") == "LinearWarmup");
  CHECK(md.at("after") == "CosineAnnealingLR");
  CHECK(md.at("after.t_max") == "10");

  optim::SGD b = two_groups(0.2, 0.05);
  optim::LinearWarmup sb(b, 1, 1.0, std::make_unique<optim::CosineAnnealingLR>(b, 3));
  sb.load_state(md);
  CHECK(sb.last_step() == 5);
  CHECK(sb.warmup_steps() == 3);
  CHECK(sb.last_lr() == sa.last_lr());
  CHECK(b.group_lr(1) == a.group_lr(1));
  for (int i = 0; i < 4; ++i) {
    sa.step();
    sb.step();
    CHECK(sb.last_lr() == sa.last_lr());
  }

  optim::SGD c = two_groups(0.2, 0.05);
  optim::StepLR step(c, 2);
  CHECK_THROWS_WITH(step.load_state(md),
                    Catch::Contains("saved by LinearWarmup, this scheduler is StepLR"));
  optim::LinearWarmup plain(c, 2);
  CHECK_THROWS_WITH(plain.load_state(md), Catch::Contains("warms up into CosineAnnealingLR"));
  optim::SGD one(std::vector<Tensor>{Tensor::zeros({2})}, 0.1);
  optim::LinearWarmup s1(one, 1, 1.0, std::make_unique<optim::CosineAnnealingLR>(one, 3));
  CHECK_THROWS_WITH(s1.load_state(md), Catch::Contains("for 2 parameter groups"));
  auto bad = md;
  bad["after.t_max"] = std::string("0");  // a char* would trip GCC 12's -Wrestrict
  const auto before = sb.last_lr();
  CHECK_THROWS_WITH(sb.load_state(bad), Catch::Contains("t_max must be >= 1, got 0"));
  CHECK(sb.last_lr() == before);  // unchanged
  CHECK(sb.last_step() == 9);
}
