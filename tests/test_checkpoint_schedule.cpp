// SPDX-License-Identifier: Apache-2.0
// Checkpoints of AdamW with parameter groups and a warm-up + cosine schedule
// (engine/optim/checkpoint.h): k steps, save, resume into fresh objects, n - k steps equals n
// steps straight, bit for bit on the CPU; the group and scheduler settings come back from the
// file, and a file without a schedule, or of another grouping, is refused without changes.
#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "anvil/anvil.h"
#include "helpers/bytes.h"
#include "helpers/datasets.h"

using namespace anvil;

namespace {

nn::ModulePtr small_net(std::uint64_t seed) {
  Generator g(seed);
  auto net = std::make_shared<nn::Sequential>();
  net->add(std::make_shared<nn::Linear>(20, 16, true, &g));
  net->add(nn::ReLU());
  net->add(std::make_shared<nn::Dropout>(0.1));
  net->add(std::make_shared<nn::Linear>(16, 5, true, &g));
  return net;
}

// AdamW with decay on the weights and none on the biases (named "*.bias").
struct Run {
  nn::ModulePtr net;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<optim::LRScheduler> sched;
};

Run make_run(std::uint64_t seed, double lr = 0.01, std::int64_t t_max = 10) {
  Run r;
  r.net = small_net(seed);
  std::vector<Tensor> decay, no_decay;
  for (const auto& [name, p] : r.net->named_parameters())
    (name.ends_with("bias") ? no_decay : decay).push_back(p);
  r.opt = std::make_unique<optim::AdamW>(
      std::vector<optim::ParamGroup<optim::AdamWOptions>>{
          {.params = decay},
          {.params = no_decay, .options = optim::AdamWOptions{.lr = 2 * lr, .weight_decay = 0}}},
      optim::AdamWOptions{.lr = lr, .weight_decay = 0.05});
  r.sched = std::make_unique<optim::LinearWarmup>(
      *r.opt, 3, 0.2, std::make_unique<optim::CosineAnnealingLR>(*r.opt, t_max, 1e-4));
  return r;
}

void train(Run& r, int steps) {
  Generator g(77);
  const Tensor x = normal({8, 20}, 0, 1, DType::f32, &g);
  const Tensor y = randint({8}, 0, 5, DType::i64, &g);
  for (int i = 0; i < steps; ++i) {
    r.opt->zero_grad();
    Tensor loss = cross_entropy(r.net->forward(x), y);
    loss.backward();
    r.opt->step();
    r.sched->step();
  }
}

std::vector<std::string> bytes_of(const Run& r) {
  std::vector<std::string> out;
  for (const auto& [n, t] : r.net->named_parameters()) out.push_back(test::tensor_bytes(t));
  for (const auto& [n, t] : r.opt->state()) out.push_back(n + test::tensor_bytes(t));
  return out;
}

}  // namespace

TEST_CASE("resuming AdamW with groups and a warm-up cosine schedule is bit-exact",
          "[checkpoint][optim]") {
  test::ScratchDir dir("ckpt_sched");
  const std::string path = dir.file("run.safetensors");
  manual_seed(9);
  Run straight = make_run(1);
  train(straight, 8);

  manual_seed(9);
  Run first = make_run(1);
  train(first, 5);
  optim::save_checkpoint(path, *first.net, first.opt.get(), first.sched.get(), {{"step", "5"}});

  manual_seed(1234);
  Run resumed = make_run(2, 0.5, 99);  // other weights, lrs and schedule length: all restored
  const auto info =
      optim::load_checkpoint(path, *resumed.net, resumed.opt.get(), resumed.sched.get());
  CHECK(info.optimizer == "AdamW");
  CHECK(info.scheduler == "LinearWarmup");
  CHECK(info.extra.at("step") == "5");
  CHECK(info.metadata.at("optim.group.1.weight_decay") == "0");
  CHECK(resumed.sched->last_step() == 5);
  CHECK(resumed.opt->group_options(1).lr == first.opt->group_options(1).lr);
  CHECK(resumed.opt->steps() == 5);
  train(resumed, 3);
  CHECK(bytes_of(resumed) == bytes_of(straight));
  CHECK(resumed.sched->last_lr() == straight.sched->last_lr());
  CHECK(resumed.opt->group_lr(0) == straight.opt->group_lr(0));
}

TEST_CASE("a checkpoint without a schedule or of another grouping is refused, changing nothing",
          "[checkpoint][optim]") {
  test::ScratchDir dir("ckpt_sched");
  const std::string no_sched = dir.file("no_sched.safetensors");
  Run a = make_run(1);
  train(a, 2);
  optim::save_checkpoint(no_sched, *a.net, a.opt.get(), {});
  Run b = make_run(2);
  const auto before = bytes_of(b);
  CHECK_THROWS_WITH(optim::load_checkpoint(no_sched, *b.net, b.opt.get(), b.sched.get()),
                    Catch::Contains("holds no scheduler state"));
  CHECK(bytes_of(b) == before);

  // One group of all parameters: the grouped optimizer's state does not fit it.
  const std::string with_sched = dir.file("grouped.safetensors");
  optim::save_checkpoint(with_sched, *a.net, a.opt.get(), a.sched.get());
  auto net = small_net(3);
  optim::AdamW flat(net->parameters(), {});
  optim::StepLR step(flat, 2);
  CHECK_THROWS_WITH(
      optim::load_checkpoint(with_sched, *net, &flat, static_cast<optim::LRScheduler*>(nullptr)),
      Catch::Contains("2 parameter groups, this optimizer has 1"));
  CHECK(flat.lr() == 1e-3);
  CHECK_THROWS_WITH(optim::load_checkpoint(with_sched, *net, &flat, &step),
                    Catch::Contains("saved by LinearWarmup, this scheduler is StepLR"));

  // A bad scheduler entry is found before the model, the optimizer or the schedule change.
  const std::string bad = dir.file("bad_sched.safetensors");
  SafetensorsFile file = load_safetensors(with_sched);
  file.metadata["scheduler.after.t_max"] = std::string("-2");
  save_safetensors(bad, file.tensors, file.metadata);
  Run c = make_run(3);
  train(c, 1);
  const auto c_before = bytes_of(c);
  const auto lrs_before = c.sched->last_lr();
  CHECK_THROWS_WITH(optim::load_checkpoint(bad, *c.net, c.opt.get(), c.sched.get()),
                    Catch::Contains("t_max must be >= 1, got -2"));
  CHECK(bytes_of(c) == c_before);
  CHECK(c.sched->last_lr() == lrs_before);
  CHECK(c.sched->last_step() == 1);
  CHECK(c.opt->steps() == 1);
}
