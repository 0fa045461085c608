// SPDX-License-Identifier: Apache-2.0
// anvil's optimizers with parameter groups (one added part-way) and its lr schedulers against
// values recorded once with PyTorch (tests/fixtures/torch_optim/reference.json, written by
// make_reference.py beside it): the same initial values and gradients, formulas both sides
// compute, replayed through SGD, Adam and AdamW and through StepLR, MultiStepLR,
// CosineAnnealingLR and LinearWarmup (PyTorch's LinearLR to a factor of 1).
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "helpers/f64_steps.h"

using namespace anvil;
using nlohmann::json;
using test::f64_tensor;

namespace {

const json& reference() {
  static const json j = [] {
    const std::string path = std::string(ANVIL_TEST_FIXTURES_DIR) + "/torch_optim/reference.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    return json::parse(in);
  }();
  return j;
}

// make_reference.py's initial values and gradients (its "initial" and "gradient" fields).
std::vector<double> initial(int n, int k) {
  std::vector<double> v;
  v.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v.push_back(std::sin(0.7 * i + k));
  return v;
}
std::vector<double> gradient(int n, int k, int step) {
  std::vector<double> v;
  v.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v.push_back(std::cos(1.3 * i + 0.4 * step + k) * (1 + 0.1 * step));
  return v;
}

// A PyTorch group dict over `defaults`: the fields it names, the others the defaults'.
optim::SGDOptions sgd_options(const json& g, optim::SGDOptions o) {
  o.lr = g.value("lr", o.lr);
  o.momentum = g.value("momentum", o.momentum);
  o.dampening = g.value("dampening", o.dampening);
  o.weight_decay = g.value("weight_decay", o.weight_decay);
  o.nesterov = g.value("nesterov", o.nesterov);
  return o;
}
template <typename Options>
Options adam_options(const json& g, Options o) {
  o.lr = g.value("lr", o.lr);
  if (g.contains("betas")) {
    o.beta1 = g["betas"][0];
    o.beta2 = g["betas"][1];
  }
  o.eps = g.value("eps", o.eps);
  o.weight_decay = g.value("weight_decay", o.weight_decay);
  return o;
}

// Replays the recorded run: the groups from the start, one more group with the defaults after
// `add_after` steps, and checks every parameter after every step against PyTorch's.
template <typename Opt, typename Options>
void replay(const json& rec, Options defaults,
            const std::function<Options(const json&)>& options_of, double tolerance) {
  const int steps = reference()["steps"], add_after = reference()["add_after"];
  std::vector<Tensor> params;
  std::vector<int> sizes;
  std::vector<optim::ParamGroup<Options>> groups;
  for (const auto& g : rec["groups"]) {
    const int k = static_cast<int>(params.size());
    sizes.push_back(g["size"]);
    params.push_back(f64_tensor(initial(sizes.back(), k)));
    groups.push_back({.params = {params.back()}, .options = options_of(g)});
  }
  const int added = static_cast<int>(params.size());
  sizes.push_back(rec["added"]["size"]);
  params.push_back(f64_tensor(initial(sizes.back(), added)));
  Opt opt(std::move(groups), defaults);
  for (int step = 0; step < steps; ++step) {
    if (step == add_after) opt.add_param_group({.params = {params[added]}});
    const int live = step >= add_after ? added + 1 : added;
    for (int k = 0; k < live; ++k)
      params[k].mutable_grad() = f64_tensor(gradient(sizes[k], k, step));
    opt.step();
    for (std::size_t k = 0; k < params.size(); ++k) {
      INFO("step " << step + 1 << ", parameter " << k);
      const std::vector<double> want = rec["after_step"][step][k];
      CHECK(test::max_relative_error(params[k], want, 1e-3) < tolerance);
    }
  }
}

}  // namespace

TEST_CASE("SGD, Adam and AdamW with parameter groups match PyTorch's recorded steps",
          "[optim][groups][pytorch]") {
  const json& opts = reference()["optimizers"];
  // Both CPU variants of each update; f64 throughout, so only the order of operations differs.
  const std::string variant = GENERATE("cpu.omp", "ref");
  INFO("variant " << variant << ", recorded with torch " << reference()["torch_version"]);
  SECTION("SGD") {
    ForceVariant force("sgd_update", variant);
    const json& rec = opts["SGD"];
    const optim::SGDOptions defaults = sgd_options(rec["defaults"], {});
    replay<optim::SGD, optim::SGDOptions>(
        rec, defaults, [&](const json& g) { return sgd_options(g, defaults); }, 1e-12);
  }
  SECTION("Adam") {
    ForceVariant force("adam_update", variant);
    const json& rec = opts["Adam"];
    const auto defaults = adam_options(rec["defaults"], optim::AdamOptions{});
    replay<optim::Adam, optim::AdamOptions>(
        rec, defaults, [&](const json& g) { return adam_options(g, defaults); }, 1e-12);
  }
  SECTION("AdamW") {
    ForceVariant force("adam_update", variant);
    const json& rec = opts["AdamW"];
    const auto defaults = adam_options(rec["defaults"], optim::AdamWOptions{});
    replay<optim::AdamW, optim::AdamWOptions>(
        rec, defaults, [&](const json& g) { return adam_options(g, defaults); }, 1e-12);
  }
}

TEST_CASE("the lr schedulers match PyTorch's recorded lr on every group", "[optim][lr][pytorch]") {
  const json& scheds = reference()["schedulers"];
  for (const auto& [name, rec] : scheds.items()) {
    INFO(name);
    const std::vector<double> base = rec["base_lr"];
    std::vector<optim::ParamGroup<optim::SGDOptions>> groups;
    groups.reserve(base.size());
    for (const double lr : base)
      groups.push_back({.params = {f64_tensor({0.0})}, .options = optim::SGDOptions{.lr = lr}});
    optim::SGD opt(std::move(groups), {});
    const json& o = rec["options"];
    std::unique_ptr<optim::LRScheduler> sched;
    if (name == "StepLR")
      sched = std::make_unique<optim::StepLR>(opt, o["step_size"], o["gamma"]);
    else if (name == "MultiStepLR")
      sched = std::make_unique<optim::MultiStepLR>(opt, o["milestones"], o["gamma"]);
    else if (name == "CosineAnnealingLR")
      sched = std::make_unique<optim::CosineAnnealingLR>(opt, o["T_max"], o["eta_min"]);
    else if (name == "LinearLR")  // LinearLR to end_factor 1 over total_iters is a warm-up
      sched = std::make_unique<optim::LinearWarmup>(opt, o["total_iters"], o["start_factor"]);
    REQUIRE(sched != nullptr);
    const auto& lrs = rec["lr_after_step"];
    for (std::size_t t = 0; t < lrs.size(); ++t) {
      if (t > 0) sched->step();
      for (std::size_t g = 0; g < base.size(); ++g) {
        INFO("after step " << t << ", group " << g);
        const double want = lrs[t][g];
        CHECK(opt.group_lr(g) == Approx(want).epsilon(1e-12).margin(1e-15));
      }
    }
  }
}
