// SPDX-License-Identifier: Apache-2.0
// Optimizer parameter groups (engine/optim/optimizer.h): each group updates with its own
// options (checked against single-group optimizers over the same tensors), groups without
// options take the defaults, per-group learning rates, and the refusals.
#include <catch2/catch.hpp>
#include <vector>

#include "anvil/anvil.h"
#include "helpers/bytes.h"

using namespace anvil;

namespace {

struct Params {
  Tensor w, b, bn;  // a weight, a bias, a batch-norm scale
};

Params make_params(std::uint64_t seed) {
  Generator g(seed);
  return {normal({4, 3}, 0, 1, DType::f32, &g), normal({4}, 0, 1, DType::f32, &g),
          normal({4}, 1, 0.1, DType::f32, &g)};
}

// The same gradients for every copy: step s of parameter k.
void set_grads(Params& p, int step) {
  Generator g(100 + static_cast<std::uint64_t>(step));
  p.w.mutable_grad() = normal({4, 3}, 0, 1, DType::f32, &g);
  p.b.mutable_grad() = normal({4}, 0, 1, DType::f32, &g);
  p.bn.mutable_grad() = normal({4}, 0, 1, DType::f32, &g);
}

bool same(const Tensor& a, const Tensor& b) {
  return test::tensor_bytes(a) == test::tensor_bytes(b);
}

}  // namespace

TEST_CASE("AdamW groups: no decay on biases and batch norm, as separate optimizers",
          "[optim][groups]") {
  Params grouped = make_params(1), alone = make_params(1);
  const optim::AdamWOptions decay{.lr = 0.01, .weight_decay = 0.1};
  const optim::AdamWOptions no_decay{.lr = 0.02, .weight_decay = 0.0};
  optim::AdamW opt(
      {{.params = {grouped.w}}, {.params = {grouped.b, grouped.bn}, .options = no_decay}}, decay);
  REQUIRE(opt.num_groups() == 2);
  CHECK(opt.group_begin(1) == 1);
  CHECK(opt.params().size() == 3);
  CHECK(opt.group_options(0).weight_decay == 0.1);  // the defaults
  CHECK(opt.group_options(1).lr == 0.02);
  optim::AdamW opt_w({alone.w}, decay);
  optim::AdamW opt_b({alone.b, alone.bn}, no_decay);
  for (int s = 0; s < 4; ++s) {
    set_grads(grouped, s);
    set_grads(alone, s);
    opt.step();
    opt_w.step();
    opt_b.step();
  }
  CHECK(same(grouped.w, alone.w));
  CHECK(same(grouped.b, alone.b));
  CHECK(same(grouped.bn, alone.bn));
  // And the groups did differ: one optimizer with the decay everywhere gives another bias.
  Params one = make_params(1);
  optim::AdamW opt_one({one.w, one.b, one.bn}, decay);
  for (int s = 0; s < 4; ++s) {
    set_grads(one, s);
    opt_one.step();
  }
  CHECK(same(one.w, alone.w));
  CHECK_FALSE(same(one.b, alone.b));
}

TEST_CASE("SGD and Adam groups with their own lr, momentum, betas and decay", "[optim][groups]") {
  Params grouped = make_params(2), alone = make_params(2);
  const optim::SGDOptions a{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3};
  const optim::SGDOptions b{.lr = 0.01, .momentum = 0.5, .nesterov = true};
  optim::SGD sgd({{.params = {grouped.w, grouped.b}}, {.params = {grouped.bn}, .options = b}}, a);
  optim::SGD sgd_a({alone.w, alone.b}, a);
  optim::SGD sgd_b({alone.bn}, b);
  for (int s = 0; s < 3; ++s) {
    set_grads(grouped, s);
    set_grads(alone, s);
    sgd.step();
    sgd_a.step();
    sgd_b.step();
  }
  CHECK(same(grouped.w, alone.w));
  CHECK(same(grouped.bn, alone.bn));

  Params g2 = make_params(3), a2 = make_params(3);
  const optim::AdamOptions x{.lr = 1e-3, .beta1 = 0.8, .beta2 = 0.99, .weight_decay = 0.01};
  const optim::AdamOptions y{.lr = 5e-3, .beta1 = 0.95, .beta2 = 0.9};
  optim::Adam adam({{.params = {g2.w}, .options = x}, {.params = {g2.b, g2.bn}, .options = y}}, {});
  optim::Adam adam_x({a2.w}, x);
  optim::Adam adam_y({a2.b, a2.bn}, y);
  for (int s = 0; s < 3; ++s) {
    set_grads(g2, s);
    set_grads(a2, s);
    adam.step();
    adam_x.step();
    adam_y.step();
  }
  CHECK(same(g2.w, a2.w));
  CHECK(same(g2.b, a2.b));
  CHECK(same(g2.bn, a2.bn));
}

TEST_CASE("per-group learning rates: set_group_lr, set_lr sets every group", "[optim][groups]") {
  Params p = make_params(4);
  optim::SGD opt({{.params = {p.w}}, {.params = {p.b}, .options = optim::SGDOptions{.lr = 0.5}}},
                 optim::SGDOptions{.lr = 0.1});
  CHECK(opt.lr() == 0.1);  // the first group's
  CHECK(opt.group_lr(1) == 0.5);
  opt.set_group_lr(1, 0.25);
  CHECK(opt.group_lr(1) == 0.25);
  CHECK(opt.group_lr(0) == 0.1);
  opt.set_lr(0.05);
  CHECK(opt.group_lr(0) == 0.05);
  CHECK(opt.group_lr(1) == 0.05);
  CHECK_THROWS_WITH(opt.set_group_lr(2, 0.1), Catch::Contains("group 2 but the optimizer has 2"));
  CHECK_THROWS_WITH(opt.set_group_lr(0, -1.0), Catch::Contains("lr must be finite and >= 0"));
}

TEST_CASE("parameter groups are refused when a parameter is in two, or there are none",
          "[optim][groups]") {
  Params p = make_params(5);
  using Group = optim::ParamGroup<optim::AdamWOptions>;
  CHECK_THROWS_WITH(optim::AdamW(std::vector<Group>{{.params = {p.w, p.b}}, {.params = {p.b}}}, {}),
                    Catch::Contains("of group 1 is also in an earlier group"));
  CHECK_THROWS_WITH(optim::AdamW(std::vector<Group>{}, {}),
                    Catch::Contains("needs at least one parameter group"));
  CHECK_THROWS_WITH(
      optim::SGD(
          std::vector<optim::ParamGroup<optim::SGDOptions>>{
              {.params = {p.w}}, {.params = {p.b}, .options = optim::SGDOptions{.lr = -1}}},
          optim::SGDOptions{}),
      Catch::Contains("SGD group 1"));
}
