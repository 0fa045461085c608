// SPDX-License-Identifier: Apache-2.0
// SGD::add_param_group (engine/optim/optimizer.h), as torch.optim.Optimizer.add_param_group on
// torch.optim.SGD: a group added part-way through a run updates with its own lr, momentum,
// dampening, weight decay and Nesterov flag, its momentum buffers start fresh, checked in f64
// against torch.optim.SGD's documented update written out by hand; defaults, refusals, a folded
// optimizer, and a checkpoint of the grown optimizer resumed bit for bit.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "helpers/bytes.h"
#include "helpers/datasets.h"
#include "helpers/f64_steps.h"
#include "helpers/gradcheck.h"

using namespace anvil;
using test::f64_tensor;
using test::step_gradient;

namespace {

// torch.optim.SGD for one parameter (maximize=False), in f64:
//   g <- g + wd p
//   b <- g on the parameter's first step, else b <- mu b + (1 - dampening) g   (mu != 0 only)
//   g <- g + mu b with Nesterov, else g <- b                                   (mu != 0 only)
//   p <- p - lr g
struct Reference {
  optim::SGDOptions o;
  std::vector<double> p, buf;
  bool has_buf = false;
  void step(std::vector<double> g) {
    for (std::size_t i = 0; i < p.size(); ++i) g[i] += o.weight_decay * p[i];
    if (o.momentum != 0) {
      if (!has_buf)
        buf = g;
      else
        for (std::size_t i = 0; i < p.size(); ++i)
          buf[i] = o.momentum * buf[i] + (1 - o.dampening) * g[i];
      has_buf = true;
      for (std::size_t i = 0; i < p.size(); ++i)
        g[i] = o.nesterov ? g[i] + o.momentum * buf[i] : buf[i];
    }
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= o.lr * g[i];
  }
};

// Largest |got - want| / (|want| + 1) over the elements.
double error(const Tensor& got, const Reference& want) {
  return test::max_relative_error(got, want.p, 1.0);
}

bool same(const Tensor& a, const Tensor& b) {
  return test::tensor_bytes(a) == test::tensor_bytes(b);
}

}  // namespace

TEST_CASE("an SGD group added part-way updates with its own options, buffers from scratch",
          "[optim][sgd][groups]") {
  const std::string variant = GENERATE("cpu.omp", "ref");
  ForceVariant force("sgd_update", variant);
  const bool nesterov = GENERATE(false, true);
  INFO("variant " << variant << (nesterov ? ", Nesterov group" : ", dampened group"));
  const optim::SGDOptions first{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-2};
  const optim::SGDOptions added =
      nesterov
          ? optim::SGDOptions{.lr = 0.05, .momentum = 0.7, .weight_decay = 0.2, .nesterov = true}
          : optim::SGDOptions{.lr = 0.3, .momentum = 0.5, .dampening = 0.25};
  const std::vector<double> a0{0.5, -1.25, 2.0}, c0{-0.75, 0.125};
  Tensor a = f64_tensor(a0), c = f64_tensor(c0);
  optim::SGD opt({a}, first);
  Reference ra{first, a0}, rc{added, c0};
  for (int step = 1; step <= 5; ++step) {
    if (step == 3) {
      opt.add_param_group({.params = {c}, .options = added});
      REQUIRE(opt.num_groups() == 2);
      REQUIRE(opt.params().size() == 2);
      REQUIRE(opt.group_begin(1) == 1);
      CHECK(opt.group_options(1).momentum == added.momentum);
      CHECK(opt.group_options(1).nesterov == nesterov);
    }
    a.mutable_grad() = f64_tensor(step_gradient(3, step, 0));
    ra.step(step_gradient(3, step, 0));
    if (step >= 3) {
      c.mutable_grad() = f64_tensor(step_gradient(2, step, 1));
      rc.step(step_gradient(2, step, 1));
    }
    opt.step();
    CHECK(error(a, ra) < 1e-14);
    CHECK(error(c, rc) < 1e-14);
  }
  // The new group's buffer started from its first gradient: with dampening, a blended first
  // step (a buffer of zeros, b = (1 - dampening) g) ends elsewhere.
  if (added.dampening != 0) {
    Reference blended{added, c0, std::vector<double>(c0.size(), 0.0), true};
    for (int step = 3; step <= 5; ++step) blended.step(step_gradient(2, step, 1));
    CHECK(error(c, blended) > 1e-4);
  }
  // And the group's own options mattered: the first group's options give another c.
  Reference with_first{first, c0};
  for (int step = 3; step <= 5; ++step) with_first.step(step_gradient(2, step, 1));
  CHECK(error(c, with_first) > 1e-3);
}

TEST_CASE("an SGD group without options takes the constructor's defaults", "[optim][sgd][groups]") {
  // The one-list constructor: its options are the defaults.
  const optim::SGDOptions options{.lr = 0.2, .momentum = 0.3, .dampening = 0.1};
  optim::SGD one({f64_tensor({1.0})}, options);
  one.add_param_group({.params = {f64_tensor({2.0})}});
  CHECK(one.group_options(1).lr == 0.2);
  CHECK(one.group_options(1).momentum == 0.3);
  CHECK(one.group_options(1).dampening == 0.1);
  // A changed lr of group 0 (a scheduler's) is not a default: the constructor's is.
  one.set_group_lr(0, 0.01);
  one.add_param_group({.params = {f64_tensor({3.0})}});
  CHECK(one.group_lr(2) == 0.2);

  // The grouped constructor: its defaults, not its first group's options.
  const optim::SGDOptions defaults{.lr = 0.4, .weight_decay = 1e-3};
  optim::SGD grouped({{.params = {f64_tensor({1.0})}, .options = optim::SGDOptions{.lr = 0.9}}},
                     defaults);
  grouped.add_param_group({.params = {f64_tensor({2.0})}});
  CHECK(grouped.group_lr(1) == 0.4);
  CHECK(grouped.group_options(1).weight_decay == 1e-3);
  // Added groups are steppable right away and set_lr reaches them.
  grouped.set_lr(0.05);
  CHECK(grouped.group_lr(1) == 0.05);
}

TEST_CASE("SGD::add_param_group refuses bad groups and changes nothing", "[optim][sgd][groups]") {
  Tensor a = f64_tensor({1.0, 2.0});
  optim::SGD opt({a}, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  CHECK_THROWS_WITH(
      opt.add_param_group({.params = {f64_tensor({0.0}), a}}),
      Catch::Contains("SGD::add_param_group") && Catch::Contains("already in a group"));
  CHECK_THROWS_WITH(opt.add_param_group({.params = {Tensor()}}),
                    Catch::Contains("SGD::add_param_group"));
  CHECK_THROWS_WITH(opt.add_param_group(
                        {.params = {f64_tensor({0.0})}, .options = optim::SGDOptions{.lr = -0.5}}),
                    Catch::Contains("SGD::add_param_group") && Catch::Contains("-0.5"));
  CHECK_THROWS_WITH(opt.add_param_group({.params = {f64_tensor({0.0})},
                                         .options = optim::SGDOptions{.nesterov = true}}),
                    Catch::Contains("SGD::add_param_group") && Catch::Contains("Nesterov"));
  CHECK(opt.num_groups() == 1);
  CHECK(opt.params().size() == 1);
  // Still steps as a one-group optimizer with one momentum tensor.
  a.mutable_grad() = f64_tensor({1.0, 1.0});
  opt.step();
  CHECK(opt.state().size() == 1);
}

TEST_CASE("a folded SGD takes plain groups only and folds them too", "[optim][sgd][groups]") {
  Generator g(5);
  auto first = std::make_shared<nn::Linear>(4, 4, true, &g);
  auto second = std::make_shared<nn::Linear>(4, 3, true, &g);
  auto first_ref = std::make_shared<nn::Linear>(4, 4);
  auto second_ref = std::make_shared<nn::Linear>(4, 3);
  first_ref->weight().copy_(first->weight());
  first_ref->bias().copy_(first->bias());
  second_ref->weight().copy_(second->weight());
  second_ref->bias().copy_(second->bias());

  optim::SGD folded({first->weight(), first->bias()}, 0.1);
  folded.fold_into_backward();
  CHECK_THROWS_WITH(folded.add_param_group({.params = {second->weight()},
                                            .options = optim::SGDOptions{.momentum = 0.9}}),
                    Catch::Contains("SGD::add_param_group") && Catch::Contains("folded"));
  CHECK(folded.num_groups() == 1);
  folded.add_param_group(
      {.params = {second->weight(), second->bias()}, .options = optim::SGDOptions{.lr = 0.4}});
  optim::SGD plain({{.params = {first_ref->weight(), first_ref->bias()}},
                    {.params = {second_ref->weight(), second_ref->bias()},
                     .options = optim::SGDOptions{.lr = 0.4}}},
                   optim::SGDOptions{.lr = 0.1});

  Generator data(9);
  const Tensor x = normal({6, 4}, 0, 1, DType::f32, &data);
  const Tensor y = randint({6}, 0, 3, DType::i64, &data);
  for (int s = 0; s < 3; ++s) {
    folded.zero_grad();
    plain.zero_grad();
    cross_entropy(second->forward(sigmoid(first->forward(x))), y).backward();
    cross_entropy(second_ref->forward(sigmoid(first_ref->forward(x))), y).backward();
    folded.step();
    plain.step();
  }
  // The added layer was updated inside backward with its group's lr (Note [Folded SGD]).
  CHECK_FALSE(second->weight().grad().defined());
  CHECK(test::max_abs_diff(second->weight(), second_ref->weight()) < 1e-6);
  CHECK(test::max_abs_diff(first->weight(), first_ref->weight()) < 1e-6);
}

TEST_CASE("an SGD grown with add_param_group resumes from a checkpoint bit for bit",
          "[optim][sgd][groups][checkpoint]") {
  test::ScratchDir dir("sgd_groups");
  const std::string path = dir.file("grown.safetensors");
  auto make = [](std::uint64_t seed) {
    Generator g(seed);
    return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(5, 6, true, &g),
                                            nn::Tanh(),
                                            std::make_shared<nn::Linear>(6, 3, true, &g));
  };
  const optim::SGDOptions head{
      .lr = 0.2, .momentum = 0.5, .dampening = 0.1, .weight_decay = 1e-2, .nesterov = false};
  auto grow = [&](nn::Sequential& net) {
    const auto p = net.parameters();  // 0.weight, 0.bias, 2.weight, 2.bias
    auto opt = std::make_unique<optim::SGD>(std::vector<Tensor>{p[0], p[1]},
                                            optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
    opt->add_param_group({.params = {p[2], p[3]}, .options = head});
    return opt;
  };
  Generator data(3);
  const Tensor x = normal({7, 5}, 0, 1, DType::f32, &data);
  const Tensor y = randint({7}, 0, 3, DType::i64, &data);
  auto train = [&](nn::Sequential& net, optim::SGD& opt, int steps) {
    for (int s = 0; s < steps; ++s) {
      opt.zero_grad();
      cross_entropy(net.forward(x), y).backward();
      opt.step();
    }
  };

  auto straight = make(1);
  auto opt = grow(*straight);
  train(*straight, *opt, 2);
  optim::save_checkpoint(path, *straight, opt.get());
  const auto md = opt->state_metadata();
  CHECK(md.at("num_groups") == "2");
  CHECK(md.at("group.1.dampening") == "0.1");
  train(*straight, *opt, 3);

  auto resumed = make(2);  // other initial weights: all come from the file
  auto opt2 = grow(*resumed);
  opt2->set_group_lr(1, 7.0);  // the file's options win (as load_state_dict)
  optim::load_checkpoint(path, *resumed, opt2.get());
  CHECK(opt2->group_lr(1) == 0.2);
  CHECK(opt2->state().size() == 4);
  train(*resumed, *opt2, 3);
  const auto want = straight->parameters(), got = resumed->parameters();
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(same(got[i], want[i]));

  // An optimizer that did not grow has one group: the file is refused, nothing changes.
  auto other = make(1);
  const auto p = other->parameters();
  optim::SGD ungrown(p, head);
  CHECK_THROWS_WITH(optim::load_checkpoint(path, *other, &ungrown),
                    Catch::Contains("2 parameter groups") && Catch::Contains("has 1"));
  CHECK(ungrown.num_groups() == 1);
  CHECK(ungrown.state().empty());
}
