// SPDX-License-Identifier: Apache-2.0
// Dynamic loss scaling (engine/optim/grad_scaler.h, Note [Dynamic loss scaling]): a non-finite
// gradient skips the step (parameters and optimizer state unchanged) and backs the scale off,
// finite steps grow it, unscaling recovers the f32 gradients of an f16 backward that would
// underflow unscaled, clipping sees unscaled gradients, checkpoints restore the scaler, and bad
// options are refused naming the value.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

#include "anvil/anvil.h"
#include "engine/optim/grad_scaler.h"

using namespace anvil;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor param(const std::vector<float>& v) {
  Tensor t = Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())});
  t.set_requires_grad(true);
  return t;
}

void set_grad(Tensor& p, const std::vector<float>& g) {
  p.mutable_grad() = Tensor::from_vector(g, {static_cast<std::int64_t>(g.size())});
}

std::vector<float> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  const float* d = c.data<float>();
  return {d, d + c.numel()};
}

// Every state tensor of `opt` as values, in state() order.
std::vector<std::vector<float>> state_values(const optim::Optimizer& opt) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, t] : opt.state()) out.push_back(values(t));
  return out;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("anvil_test_grad_scaler_" + name)).string();
}

}  // namespace

TEST_CASE("GradScaler: a non-finite gradient skips the step and backs the scale off",
          "[optim][grad_scaler]") {
  for (const float bad : {kInf, -kInf, kNaN}) {
    INFO("planted gradient " << bad);
    Tensor w = param({1.0f, 2.0f, 3.0f});
    Tensor b = param({0.5f});
    optim::Adam opt({w, b}, optim::AdamOptions{.lr = 0.1});
    optim::GradScaler scaler;  // 2^16
    REQUIRE(scaler.get_scale() == 65536.0);

    // A finite step first, so that Adam has moments and a step count to keep.
    set_grad(w, {65536.0f, -65536.0f, 131072.0f});
    set_grad(b, {32768.0f});
    REQUIRE(scaler.step(opt));
    scaler.update();
    REQUIRE(opt.steps() == 1);
    REQUIRE(scaler.skipped_steps() == 0);
    REQUIRE(scaler.get_scale() == 65536.0);  // 1 of 2000 finite steps: no growth yet

    const auto w_before = values(w);
    const auto b_before = values(b);
    const auto state_before = state_values(opt);
    set_grad(w, {1.0f, bad, 2.0f});  // one element of one tensor
    set_grad(b, {4.0f});
    REQUIRE_FALSE(scaler.step(opt));
    REQUIRE(scaler.last_step_skipped());
    scaler.update();
    REQUIRE(values(w) == w_before);
    REQUIRE(values(b) == b_before);
    REQUIRE(state_values(opt) == state_before);
    REQUIRE(opt.steps() == 1);
    REQUIRE(scaler.get_scale() == 32768.0);
    REQUIRE(scaler.skipped_steps() == 1);
    REQUIRE(scaler.growth_tracker() == 0);

    // The next finite step runs again, unscaled by the new scale.
    set_grad(w, {32768.0f, 32768.0f, 32768.0f});
    set_grad(b, {0.0f});
    REQUIRE(scaler.step(opt));
    scaler.update();
    REQUIRE(opt.steps() == 2);
    REQUIRE(values(w.grad()) == std::vector<float>{1.0f, 1.0f, 1.0f});
  }
}

TEST_CASE("GradScaler: the scale grows after growth_interval finite steps in a row",
          "[optim][grad_scaler]") {
  Tensor w = param({0.0f, 0.0f});
  optim::SGD opt({w}, 0.01);
  optim::GradScaler scaler({.init_scale = 8.0, .growth_factor = 4.0, .growth_interval = 3});
  auto finite_step = [&] {
    set_grad(w, {1.0f, 2.0f});
    REQUIRE(scaler.step(opt));
    scaler.update();
  };
  auto overflow_step = [&] {
    set_grad(w, {kInf, 2.0f});
    REQUIRE_FALSE(scaler.step(opt));
    scaler.update();
  };
  finite_step();
  finite_step();
  REQUIRE(scaler.get_scale() == 8.0);
  REQUIRE(scaler.growth_tracker() == 2);
  finite_step();  // the third: x4
  REQUIRE(scaler.get_scale() == 32.0);
  REQUIRE(scaler.growth_tracker() == 0);
  finite_step();
  finite_step();
  overflow_step();  // resets the count: two more finite steps do not grow it
  REQUIRE(scaler.get_scale() == 16.0);
  finite_step();
  finite_step();
  REQUIRE(scaler.get_scale() == 16.0);
  finite_step();
  REQUIRE(scaler.get_scale() == 64.0);
  REQUIRE(scaler.skipped_steps() == 1);
}

TEST_CASE("GradScaler: unscaled f16 gradients match the f32 ones that f16 alone flushes to zero",
          "[optim][grad_scaler][autocast]") {
  // loss = 1e-9 * sum(x W): dL/dW = 1e-9 * sum over rows of x, below f16's smallest subnormal
  // (6e-8) as the f16 backward GEMM's operand dL/d(xW) = 1e-9 is. Scaled by 2^16 it is 6.6e-5,
  // a normal f16 number.
  Generator gen(11);
  const Tensor x = uniform({8, 16}, -1.0, 1.0, DType::f32, &gen);
  Tensor w = uniform({16, 4}, -1.0, 1.0, DType::f32, &gen);
  w.set_requires_grad(true);
  optim::SGD opt({w}, 0.0);
  auto loss_of = [&] { return sum(matmul(x, w)) * 1e-9; };

  loss_of().backward();
  const auto g32 = values(w.grad());
  double g_max = 0;
  for (float v : g32) g_max = std::max(g_max, std::abs(static_cast<double>(v)));
  REQUIRE(g_max > 1e-9);

  opt.zero_grad();
  {
    const AutocastGuard f16(Precision::fp16);
    loss_of().backward();
  }
  for (float v : values(w.grad())) REQUIRE(v == 0.0f);  // underflow without scaling

  opt.zero_grad();
  optim::GradScaler scaler;
  {
    const AutocastGuard f16(Precision::fp16);
    scaler.scale(loss_of()).backward();
  }
  scaler.unscale_(opt);
  const auto g16 = values(w.grad());
  // x is rounded to f16 (11 significant bits) and each gradient is one f16 rounding of an
  // f32-accumulated sum of 8 products: within 2^-9 of the largest gradient.
  REQUIRE(g16.size() == g32.size());
  for (std::size_t i = 0; i < g32.size(); ++i) {
    INFO(i << ": f32 " << g32[i] << ", f16 unscaled " << g16[i]);
    REQUIRE(std::abs(g16[i] - g32[i]) <= g_max / 512);
  }
  REQUIRE(scaler.step(opt));
  scaler.update();
}

TEST_CASE("GradScaler: clipping between unscale_ and step sees the unscaled gradients",
          "[optim][grad_scaler]") {
  Tensor w = param({10.0f, 20.0f});
  optim::SGD opt({w}, 1.0);
  optim::GradScaler scaler({.init_scale = 1024.0});
  set_grad(w, {3.0f * 1024.0f, 4.0f * 1024.0f});  // the gradient of the scaled loss
  scaler.unscale_(opt);
  REQUIRE(values(w.grad()) == std::vector<float>{3.0f, 4.0f});
  const double norm = optim::clip_grad_norm_(opt.params(), 1.0);
  REQUIRE(norm == Approx(5.0));
  REQUIRE(scaler.step(opt));  // does not unscale a second time
  scaler.update();
  const auto after = values(w);
  REQUIRE(after[0] == Approx(10.0 - 0.6).epsilon(1e-6));
  REQUIRE(after[1] == Approx(20.0 - 0.8).epsilon(1e-6));
}

TEST_CASE("GradScaler: calls out of order are refused", "[optim][grad_scaler][errors]") {
  Tensor w = param({1.0f});
  optim::SGD opt({w}, 0.1);
  optim::GradScaler scaler;
  REQUIRE_THROWS_WITH(scaler.update(), Catch::Contains("GradScaler::update") &&
                                           Catch::Contains("no step() since the last update()"));
  set_grad(w, {1.0f});
  scaler.unscale_(opt);
  REQUIRE_THROWS_WITH(scaler.unscale_(opt), Catch::Contains("already called"));
  REQUIRE(scaler.step(opt));
  REQUIRE_THROWS_WITH(scaler.step(opt), Catch::Contains("called twice without update()"));
  scaler.update();
  REQUIRE(values(w.grad()) == std::vector<float>{1.0f / 65536.0f});  // unscaled once
  opt.fold_into_backward();
  REQUIRE_THROWS_WITH(scaler.step(opt), Catch::Contains("SGD folded into backward"));
}

TEST_CASE("GradScaler: bad options are refused naming the value", "[optim][grad_scaler][errors]") {
  using O = optim::GradScalerOptions;
  REQUIRE_THROWS_WITH(optim::GradScaler(O{.init_scale = 0.0}),
                      Catch::Contains("init_scale must be a positive finite number, got 0"));
  REQUIRE_THROWS_WITH(optim::GradScaler(O{.init_scale = -2.0}),
                      Catch::Contains("init_scale must be a positive finite number, got -2"));
  REQUIRE_THROWS_WITH(optim::GradScaler(O{.init_scale = std::numeric_limits<double>::infinity()}),
                      Catch::Contains("init_scale must be a positive finite number, got inf"));
  REQUIRE_THROWS_WITH(optim::GradScaler(O{.growth_factor = 1.0}),
                      Catch::Contains("growth_factor must be a finite number > 1, got 1"));
  REQUIRE_THROWS_WITH(optim::GradScaler(O{.growth_factor = 0.5}),
                      Catch::Contains("growth_factor must be a finite number > 1, got 0.5"));
  REQUIRE_THROWS_WITH(optim::GradScaler(O{.backoff_factor = 1.0}),
                      Catch::Contains("backoff_factor must be in (0, 1), got 1"));
  REQUIRE_THROWS_WITH(optim::GradScaler(O{.backoff_factor = 0.0}),
                      Catch::Contains("backoff_factor must be in (0, 1), got 0"));
  REQUIRE_THROWS_WITH(optim::GradScaler(O{.backoff_factor = 1.5}),
                      Catch::Contains("backoff_factor must be in (0, 1), got 1.5"));
  REQUIRE_THROWS_WITH(optim::GradScaler(O{.growth_interval = 0}),
                      Catch::Contains("growth_interval must be >= 1, got 0"));
  REQUIRE_THROWS_WITH(optim::GradScaler(O{.growth_interval = -3}),
                      Catch::Contains("growth_interval must be >= 1, got -3"));
  REQUIRE_NOTHROW(optim::GradScaler(O{}));
}

TEST_CASE("GradScaler: checkpoints save and restore the scaler's state",
          "[optim][grad_scaler][checkpoint]") {
  const std::string path = temp_path("roundtrip.safetensors");
  Generator gen(3);
  auto net = std::make_shared<nn::Linear>(3, 2, true, &gen);
  optim::SGD opt(net->parameters(), 0.1);
  optim::GradScaler scaler(
      {.init_scale = 1024.0, .growth_factor = 3.0, .backoff_factor = 0.25, .growth_interval = 5});
  // Two finite steps, one overflow, two finite steps: scale 256, tracker 2, one skipped.
  for (int i = 0; i < 5; ++i) {
    for (Tensor p : opt.params()) p.mutable_grad() = Tensor::full(p.sizes(), i == 2 ? kInf : 1.0);
    scaler.step(opt);
    scaler.update();
  }
  REQUIRE(scaler.get_scale() == 256.0);
  optim::save_checkpoint(path, *net, &opt, {}, &scaler);

  optim::GradScaler restored;  // defaults: every field differs
  optim::load_checkpoint(path, *net, &opt, &restored);
  REQUIRE(restored.get_scale() == 256.0);
  REQUIRE(restored.growth_tracker() == 2);
  REQUIRE(restored.skipped_steps() == 1);
  REQUIRE(restored.options().growth_factor == 3.0);
  REQUIRE(restored.options().backoff_factor == 0.25);
  REQUIRE(restored.options().growth_interval == 5);
  // It continues as the original would: three more finite steps grow the scale.
  for (int i = 0; i < 3; ++i) {
    for (Tensor p : opt.params()) p.mutable_grad() = Tensor::full(p.sizes(), 1.0);
    restored.step(opt);
    restored.update();
  }
  REQUIRE(restored.get_scale() == 768.0);

  // A checkpoint without scaler state cannot restore one, and changes nothing.
  const std::string plain = temp_path("plain.safetensors");
  optim::save_checkpoint(plain, *net, &opt);
  REQUIRE_THROWS_WITH(optim::load_checkpoint(plain, *net, &opt, &restored),
                      Catch::Contains("holds no loss-scaler state"));
  REQUIRE(restored.get_scale() == 768.0);
  std::filesystem::remove(path);
  std::filesystem::remove(plain);
}

TEST_CASE("GradScaler: a bad saved state is refused naming the key, the scaler unchanged",
          "[optim][grad_scaler][checkpoint][errors]") {
  optim::GradScaler scaler({.init_scale = 128.0});
  auto state = optim::GradScaler().state_metadata();
  state["scale"] = "-1";
  REQUIRE_THROWS_WITH(scaler.load_state(state),
                      Catch::Contains("scale must be a positive finite number, got -1"));
  state = optim::GradScaler().state_metadata();
  state["growth_tracker"] = "2000";
  REQUIRE_THROWS_WITH(scaler.load_state(state),
                      Catch::Contains("growth_tracker must be in [0, 2000), got 2000"));
  state = optim::GradScaler().state_metadata();
  state.erase("backoff_factor");
  REQUIRE_THROWS_WITH(scaler.load_state(state), Catch::Contains("no 'backoff_factor'"));
  state = optim::GradScaler().state_metadata();
  state["growth_factor"] = "1";
  REQUIRE_THROWS_WITH(scaler.load_state(state),
                      Catch::Contains("growth_factor must be a finite number > 1, got 1"));
  REQUIRE(scaler.get_scale() == 128.0);
}
