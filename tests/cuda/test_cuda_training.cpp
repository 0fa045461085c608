// SPDX-License-Identifier: Apache-2.0
// Training on the GPU against the CPU: every CUDA variant of the optimizer and dropout tables
// against the CPU `ref` on the same inputs, the optimizer classes and clip_grad_norm_ on CUDA
// parameters, and a few training steps of fcn5 and mlp_mnist on cuda:0 against the same steps
// on the CPU (same seed, so the same initial weights and batch). Runs only with a GPU
// (gpu_main.cpp reports the binary skipped otherwise).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd/functions.h"
#include "engine/core/cuda_backend.h"
#include "engine/core/random.h"
#include "engine/dispatch/dropout_problem.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/optimizer_problem.h"
#include "engine/optim/optimizer.h"
#include "helpers/gradcheck.h"
#include "helpers/optimizer_cases.h"
#include "helpers/variant_harness.h"
#include "kernels/register.h"
#include "models/training_step.h"

using namespace anvil;

namespace {

const Device kGpu = Device::cuda(0);

void check_lists(const test::TensorList& cpu, const test::TensorList& gpu, double tol) {
  const std::string bad = anvil::test::compare_lists(cpu, gpu, tol);
  INFO(bad);
  CHECK(bad.empty());
}

void setup() {
  require_cuda("test_cuda_training");
  register_builtin_kernels();
}

}  // namespace

// What the GPU driver loop (tests/cuda/test_cuda_op_drivers.cpp) does not check of the CUDA
// optimizer variants, against ref on the host (tests/helpers/optimizer_cases.h): SGD's momentum
// buffer from its creation step on, nesterov; grad_norm's determinism; grad_scale's found_inf.
TEST_CASE("cuda.custom.sgd matches ref", "[cuda][optim]") {
  setup();
  const DType dtype = GENERATE(DType::f32, DType::f64);
  const double tol = dtype == DType::f32 ? 2e-6 : 1e-13;
  const std::vector<SgdHyper> cases = {{0.05, 0.9, 0.0, 0.0, false}, {0.05, 0.9, 0.0, 0.001, true}};
  test::VariantHarness harness(sgd_update_table(), DeviceType::cuda,
                               static_cast<int>(cases.size()));
  for (const auto& h : cases) anvil::test::check_sgd_variants(harness, dtype, kGpu, h, tol, 3);
  harness.finish();
  CHECK(harness.ran("cuda.custom.sgd") == static_cast<int>(cases.size()));
}

TEST_CASE("cuda.custom.grad_norm and grad_scale match ref", "[cuda][optim]") {
  setup();
  const DType dtype = GENERATE(DType::f32, DType::f64);
  // Deterministic: the same list gives the same bits.
  test::VariantHarness norm(grad_norm_table(), DeviceType::cuda, 1);
  anvil::test::check_grad_norm_variants(norm, dtype, kGpu, 1e-10, true, 7);
  norm.finish();
  CHECK(norm.ran("cuda.custom.grad_norm") == 1);
  test::VariantHarness scale(grad_scale_table(), DeviceType::cuda, 1);
  anvil::test::check_grad_scale_variants(scale, dtype, kGpu, 7);
  scale.finish();
  CHECK(scale.ran("cuda.custom.grad_scale") == 1);
}

TEST_CASE("multi-tensor kernels stride over more chunks than blocks", "[cuda][optim]") {
  setup();
  // 17,000,003 elements = 1038 chunks of 16384 > the 1024-block grid, plus a tail tensor.
  test::TensorList cpu = test::make_list(DType::f32, 9, {17000003, 5}), gpu = cpu.to(kGpu);
  auto ec = cpu.entries(true, false), eg = gpu.entries(true, false);
  OptimizerArgs ac = test::args_for(OptimOp::sgd, DType::f32, Device::cpu(), ec);
  OptimizerArgs ag = test::args_for(OptimOp::sgd, DType::f32, kGpu, eg);
  ac.sgd = ag.sgd = SgdHyper{0.1, 0.0, 0.0, 0.0, false};
  test::variant(sgd_update_table(), "ref").fn(ac);
  test::variant(sgd_update_table(), "cuda.custom.sgd").fn(ag);
  check_lists(cpu, gpu, 2e-6);
  double rc = -1, rg = -1;
  OptimizerArgs nc = test::args_for(OptimOp::grad_norm, DType::f32, Device::cpu(), ec);
  OptimizerArgs ng = test::args_for(OptimOp::grad_norm, DType::f32, kGpu, eg);
  nc.result = &rc;
  ng.result = &rg;
  test::variant(grad_norm_table(), "ref").fn(nc);
  test::variant(grad_norm_table(), "cuda.custom.grad_norm").fn(ng);
  CHECK(rg == Approx(rc).epsilon(1e-10));
}

TEST_CASE("SGD, Adam and clip_grad_norm_ on CUDA parameters match the CPU", "[cuda][optim]") {
  setup();
  Generator gen(21);
  std::vector<Tensor> cpu, gpu;
  for (std::int64_t n : {3, 500, 40000}) {
    Tensor p = normal({n}, 0, 1, DType::f32, &gen);
    Tensor c = p.clone();
    c.set_requires_grad(true);
    Tensor g = p.to(kGpu);
    g.set_requires_grad(true);
    cpu.push_back(c);
    gpu.push_back(g);
  }
  auto set_grads = [&](std::uint64_t seed) {
    Generator gg(seed);
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      Tensor g = normal(cpu[i].sizes(), 0, 3, DType::f32, &gg);
      cpu[i].mutable_grad() = g.clone();
      gpu[i].mutable_grad() = g.to(kGpu);
    }
  };
  SECTION("clip_grad_norm_") {
    set_grads(1);
    const double nc = optim::clip_grad_norm_(cpu, 1.0);
    const double ng = optim::clip_grad_norm_(gpu, 1.0);
    CHECK(ng == Approx(nc).epsilon(1e-6));
    for (std::size_t i = 0; i < cpu.size(); ++i)
      CHECK(test::max_abs_diff(cpu[i].grad(), gpu[i].grad()) <= 1e-6);
  }
  SECTION("SGD with momentum, Nesterov and weight decay") {
    optim::SGDOptions o{0.05, 0.9, 0.0, 0.01, true};
    optim::SGD sc(cpu, o), sg(gpu, o);
    for (int s = 0; s < 3; ++s) {
      set_grads(10 + s);
      sc.step();
      sg.step();
    }
    for (std::size_t i = 0; i < cpu.size(); ++i) CHECK(test::max_abs_diff(cpu[i], gpu[i]) <= 1e-5);
    const auto st = sg.state();
    REQUIRE(st.size() == cpu.size());
    CHECK(st[0].second.device() == kGpu);
  }
  SECTION("Adam") {
    optim::AdamOptions o;
    o.lr = 1e-2;
    optim::Adam ac(cpu, o), ag(gpu, o);
    for (int s = 0; s < 3; ++s) {
      set_grads(20 + s);
      ac.step();
      ag.step();
    }
    for (std::size_t i = 0; i < cpu.size(); ++i) CHECK(test::max_abs_diff(cpu[i], gpu[i]) <= 1e-5);
  }
}

TEST_CASE("cuda.custom.dropout draws the mask of ref", "[cuda][dropout]") {
  setup();
  const DType dtype = GENERATE(DType::f32, DType::f64);
  const double p = GENERATE(0.2, 0.5);
  Generator data(3);
  Tensor x = normal({10007}, 0, 1, dtype, &data);  // not a multiple of 4
  Tensor xg = x.to(kGpu);
  Tensor yc = Tensor::empty(x.sizes(), dtype), mc = Tensor::empty(x.sizes(), dtype);
  Tensor yg = Tensor::empty(x.sizes(), dtype, kGpu), mg = Tensor::empty(x.sizes(), dtype, kGpu);
  Generator gc(77), gg(77);
  DropoutArgs ac, ag;
  ac.problem = {dtype, Device::cpu(), x.numel(), p};
  ag.problem = {dtype, kGpu, x.numel(), p};
  ac.x = x.data_ptr();
  ac.y = yc.data_ptr();
  ac.mask = mc.data_ptr();
  ac.gen = &gc;
  ag.x = xg.data_ptr();
  ag.y = yg.data_ptr();
  ag.mask = mg.data_ptr();
  ag.gen = &gg;
  test::variant(dropout_table(), "ref").fn(ac);
  test::variant(dropout_table(), "cuda.custom.dropout").fn(ag);
  CHECK(test::max_abs_diff(mc, mg) == 0.0);
  CHECK(test::max_abs_diff(yc, yg) == 0.0);
  CHECK(gc.next() == gg.next());  // both drew one seed

  // Through autograd: the forward on the GPU, the backward multiplies by the same mask.
  Tensor xr = xg.clone();
  xr.set_requires_grad(true);
  Generator gd(77);
  Tensor y = dropout(xr, p, true, &gd);
  CHECK(y.device() == kGpu);
  CHECK(test::max_abs_diff(y, yc) == 0.0);
  sum(y).backward();
  CHECK(test::max_abs_diff(xr.grad(), mc) == 0.0);
}

namespace {

// Losses of `steps` training steps and the final parameters, on `device`.
struct Run {
  std::vector<double> losses;
  std::vector<Tensor> params;  // on the host
};

Run run_steps(const std::string& model, std::int64_t batch, Device device, bool fold, int steps) {
  models::TrainingStep s(model, batch, /*seed=*/3, fold, device);
  // Plain FP32 GEMMs on the GPU (a TF32 default would need a looser tolerance).
  std::unique_ptr<ForceVariant> force;
  if (device.is_cuda() && gemm_table().find("cuda.cublas") != nullptr)
    force = std::make_unique<ForceVariant>("gemm", "cuda.cublas");
  // On the CPU, dropout draws the Philox stream of cuda.custom.dropout (`ref`), so that both
  // runs drop the same units.
  std::unique_ptr<ForceVariant> drop;
  if (device.is_cpu()) drop = std::make_unique<ForceVariant>("dropout", "ref");
  Run r;
  for (int i = 0; i < steps; ++i) {
    s.train_step();
    r.losses.push_back(s.last_loss());
  }
  for (const auto& p : s.net().parameters()) r.params.push_back(p.detach().to(Device::cpu()));
  return r;
}

void compare_runs(const Run& cpu, const Run& gpu, double param_tol) {
  REQUIRE(cpu.losses.size() == gpu.losses.size());
  for (std::size_t i = 0; i < cpu.losses.size(); ++i) {
    INFO("step " << i);
    CHECK(gpu.losses[i] == Approx(cpu.losses[i]).epsilon(1e-4));
  }
  REQUIRE(cpu.params.size() == gpu.params.size());
  for (std::size_t i = 0; i < cpu.params.size(); ++i) {
    INFO("parameter " << i << " " << shape_str(cpu.params[i].sizes()));
    CHECK(test::max_abs_diff(cpu.params[i], gpu.params[i]) <= param_tol);
  }
}

}  // namespace

TEST_CASE("fcn5 trains on the GPU as on the CPU", "[cuda][training]") {
  setup();
  const bool fold = GENERATE(true, false);
  INFO("SGD folded into backward: " << fold);
  const Run cpu = run_steps("fcn5", 4, Device::cpu(), fold, 3);
  const Run gpu = run_steps("fcn5", 4, kGpu, fold, 3);
  compare_runs(cpu, gpu, 2e-5);
  CHECK(gpu.losses.back() < gpu.losses.front());
}

TEST_CASE("mlp_mnist trains on the GPU as on the CPU, dropout included", "[cuda][training]") {
  setup();
  const Run cpu = run_steps("mlp_mnist", 16, Device::cpu(), true, 3);
  const Run gpu = run_steps("mlp_mnist", 16, kGpu, true, 3);
  compare_runs(cpu, gpu, 2e-5);
}

TEST_CASE("mlp_mnist with Adam on the GPU matches the CPU", "[cuda][training]") {
  setup();
  const auto& info = models::info("mlp_mnist");
  auto run = [&](Device device) {
    models::ModelOptions mo;
    mo.seed = 5;
    nn::ModulePtr net = models::create("mlp_mnist", mo);
    Generator gen(6);
    models::Batch b = models::synthetic_batch(info, 32, gen);
    std::unique_ptr<ForceVariant> drop, force;
    if (device.is_cuda()) {
      net->to(device);
      b.input = b.input.to(device);
      b.target = b.target.to(device);
      if (gemm_table().find("cuda.cublas") != nullptr)
        force = std::make_unique<ForceVariant>("gemm", "cuda.cublas");
    } else {
      drop = std::make_unique<ForceVariant>("dropout", "ref");
    }
    optim::AdamOptions o;
    optim::Adam opt(net->parameters(), o);
    Run r;
    net->train(true);
    for (int i = 0; i < 3; ++i) {
      opt.zero_grad();
      Tensor loss = models::model_loss(info, net->forward(b.input), b.target);
      loss.backward();
      opt.step();
      r.losses.push_back(loss.item());
    }
    for (const auto& p : net->parameters()) r.params.push_back(p.detach().to(Device::cpu()));
    return r;
  };
  const Run cpu = run(Device::cpu());
  const Run gpu = run(kGpu);
  // Adam normalises each update to about lr, so a tiny gradient difference can move a
  // parameter by up to lr where the gradient is near zero: a looser bound than for SGD.
  compare_runs(cpu, gpu, 1e-3);
}
