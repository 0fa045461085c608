// SPDX-License-Identifier: Apache-2.0
// The optimizer and learning-rate schedule of `anvil train` (tools/anvil/optimizer_setup.h).
#include "tools/anvil/optimizer_setup.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/core/error.h"

namespace anvil::tools {
namespace {

constexpr const char* kWhere = "anvil train";

}  // namespace

void check_optimizer_config(const TrainConfig& c) {
  ANVIL_CHECK_CONFIG(c.optimizer == "sgd" || c.optimizer == "adam" || c.optimizer == "adamw",
                     kWhere, "--optimizer must be sgd, adam or adamw, got '", c.optimizer, "'");
  ANVIL_CHECK_CONFIG(c.optimizer == "sgd" || c.momentum == 0.0, kWhere,
                     "--momentum applies to sgd, not ", c.optimizer);
  const double wd = weight_decay_of(c);
  ANVIL_CHECK_CONFIG(wd >= 0 && wd <= 1, kWhere, "--weight-decay must be in [0, 1], got ", wd);
  // See Note [Sharded optimizer update]: a rank's shard is a flat block of several parameters.
  ANVIL_CHECK_CONFIG(!c.shard_optimizer || wd == 0, kWhere, "--shard-optimizer with weight decay (",
                     wd,
                     ") is not supported: a shard mixes weights and biases, which anvil train "
                     "decays differently; add --weight-decay 0");
  ANVIL_CHECK_CONFIG(c.lr_schedule == "none" || c.lr_schedule == "step" ||
                         c.lr_schedule == "multistep" || c.lr_schedule == "cosine",
                     kWhere, "--lr-schedule must be none, step, multistep or cosine, got '",
                     c.lr_schedule, "'");
  ANVIL_CHECK_CONFIG(c.milestones.empty() == (c.lr_schedule != "multistep"), kWhere,
                     c.milestones.empty()
                         ? "--lr-schedule multistep needs --milestones (epochs, e.g. 30,60)"
                         : "--milestones applies to --lr-schedule multistep, got --lr-schedule ",
                     c.milestones.empty() ? "" : c.lr_schedule);
  ANVIL_CHECK_CONFIG(c.milestones.size() <= 1024, kWhere,
                     "--milestones takes at most 1024 epochs, got ", c.milestones.size());
  for (const int m : c.milestones)
    ANVIL_CHECK_CONFIG(m >= 1 && m <= kMaxEpochs, kWhere, "--milestones: each must be in [1, ",
                       kMaxEpochs, "], got ", m);
  ANVIL_CHECK_CONFIG(c.warmup_steps >= 0 && c.warmup_steps <= kMaxWarmupSteps, kWhere,
                     "--warmup-steps must be in [0, ", kMaxWarmupSteps, "], got ", c.warmup_steps);
  ANVIL_CHECK_CONFIG(c.step_epochs >= 0 && c.step_epochs <= kMaxEpochs, kWhere,
                     "--step-epochs must be in [1, ", kMaxEpochs, "], got ", c.step_epochs);
  ANVIL_CHECK_CONFIG(c.cosine_epochs >= 0 && c.cosine_epochs <= kMaxEpochs, kWhere,
                     "--cosine-epochs must be in [1, ", kMaxEpochs, "], got ", c.cosine_epochs);
  ANVIL_CHECK_CONFIG(c.step_epochs == 0 || c.lr_schedule == "step", kWhere,
                     "--step-epochs applies to --lr-schedule step, got --lr-schedule ",
                     c.lr_schedule);
  ANVIL_CHECK_CONFIG(c.cosine_epochs == 0 || c.lr_schedule == "cosine", kWhere,
                     "--cosine-epochs applies to --lr-schedule cosine, got --lr-schedule ",
                     c.lr_schedule);
  ANVIL_CHECK_CONFIG((c.lr_schedule != "step" && c.lr_schedule != "multistep") || c.lr_decay < 1,
                     kWhere, "--lr-schedule ", c.lr_schedule,
                     " multiplies the lr by --lr-decay, which must be below 1, got ", c.lr_decay);
  ANVIL_CHECK_CONFIG(c.lr_schedule != "cosine" || c.lr_decay == 1, kWhere, "--lr-decay ",
                     c.lr_decay, " does not apply to --lr-schedule cosine");
  // The per-epoch decay sets the lr each epoch; a scheduler sets it each step.
  ANVIL_CHECK_CONFIG(c.decay_after == 0 || c.lr_schedule == "none", kWhere, "--decay-after ",
                     c.decay_after, " is the per-epoch decay, which does not combine with ",
                     "--lr-schedule ", c.lr_schedule);
  ANVIL_CHECK_CONFIG(c.decay_after == 0 || c.warmup_steps == 0, kWhere, "--decay-after ",
                     c.decay_after, " is the per-epoch decay, which does not combine with ",
                     "--warmup-steps ", c.warmup_steps, " (use --lr-schedule step)");
}

double weight_decay_of(const TrainConfig& c) {
  if (c.weight_decay) return *c.weight_decay;
  return c.optimizer == "adamw" ? optim::AdamWOptions{}.weight_decay : 0.0;
}

// Note [Weight decay groups]
// Weight decay shrinks weights towards 0; on a bias or a batch-norm scale or shift it only
// removes freedom the layer needs (a batch-norm scale decayed to 0 switches its channel off),
// so anvil train, as most training recipes, decays the parameters of two or more dimensions
// (linear, conv, LSTM, embedding weights) and not those of one (biases, batch-norm scale and
// shift): two parameter groups, in that order, each in net->parameters() order. Without decay
// it keeps one group over net->parameters(), so checkpoints from before --weight-decay resume.
namespace {

template <typename Opt, typename Options>
std::unique_ptr<optim::Optimizer> build(std::vector<Tensor> params, Options o, bool split) {
  if (!split) return std::make_unique<Opt>(std::move(params), o);
  std::vector<Tensor> decay, no_decay;
  for (Tensor& p : params) (p.dim() >= 2 ? decay : no_decay).push_back(std::move(p));
  Options off = o;
  off.weight_decay = 0;
  return std::make_unique<Opt>(
      std::vector<optim::ParamGroup<Options>>{{.params = std::move(decay)},
                                              {.params = std::move(no_decay), .options = off}},
      o);
}

}  // namespace

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, std::vector<Tensor> params) {
  const double wd = weight_decay_of(c);  // check_optimizer_config has checked the options
  const bool split = wd > 0 && !c.shard_optimizer;
  if (c.optimizer == "adam")
    return build<optim::Adam>(std::move(params), optim::AdamOptions{.lr = c.lr, .weight_decay = wd},
                              split);
  if (c.optimizer == "adamw")
    return build<optim::AdamW>(std::move(params),
                               optim::AdamWOptions{.lr = c.lr, .weight_decay = wd}, split);
  return build<optim::SGD>(
      std::move(params), optim::SGDOptions{.lr = c.lr, .momentum = c.momentum, .weight_decay = wd},
      split);
}

// Note [Schedules in anvil train]
// --lr-schedule step, multistep and cosine, and --warmup-steps, are optim::StepLR, MultiStepLR,
// CosineAnnealingLR and LinearWarmup stepped after every optimizer step, so an epoch of S steps
// is S scheduler steps: step multiplies the lr by --lr-decay every --step-epochs epochs (S x
// step-epochs steps), multistep at the start of each --milestones epoch (S x milestone steps),
// cosine anneals it to 0 over --cosine-epochs epochs (default --epochs; past them the cosine
// rises again, as PyTorch's), and the warm-up multiplies either by a factor rising linearly from
// 1/(W+1) to 1 over the first W steps. The scheduler's state is in every checkpoint and the
// schedule's description in the run metadata, so a resumed run continues the same schedule;
// cosine's length is explicit (--cosine-epochs) so that a run resumed with more --epochs can
// repeat the first run's schedule. An epoch's reported lr is the lr of its first step.
std::unique_ptr<optim::LRScheduler> make_scheduler(const TrainConfig& c, optim::Optimizer& opt,
                                                   std::int64_t steps_per_epoch) {
  std::unique_ptr<optim::LRScheduler> s;
  if (c.lr_schedule == "step")
    s = std::make_unique<optim::StepLR>(opt, steps_per_epoch * std::max(c.step_epochs, 1),
                                        c.lr_decay);
  else if (c.lr_schedule == "multistep") {
    std::vector<std::int64_t> steps;
    for (const int m : c.milestones) steps.push_back(steps_per_epoch * m);
    s = std::make_unique<optim::MultiStepLR>(opt, std::move(steps), c.lr_decay);
  } else if (c.lr_schedule == "cosine")
    s = std::make_unique<optim::CosineAnnealingLR>(
        opt, steps_per_epoch * (c.cosine_epochs > 0 ? c.cosine_epochs : c.epochs));
  if (c.warmup_steps > 0)
    s = std::make_unique<optim::LinearWarmup>(
        opt, c.warmup_steps, 1.0 / static_cast<double>(c.warmup_steps + 1), std::move(s));
  return s;
}

std::string schedule_description(const TrainConfig& c) {
  std::string s;
  if (c.lr_schedule == "step")
    s = fmt::format("step x{} every {} epoch(s)", c.lr_decay, std::max(c.step_epochs, 1));
  else if (c.lr_schedule == "multistep")
    s = fmt::format("multistep x{} at epoch(s) {}", c.lr_decay, fmt::join(c.milestones, ","));
  else if (c.lr_schedule == "cosine")
    s = fmt::format("cosine over {} epoch(s)", c.cosine_epochs > 0 ? c.cosine_epochs : c.epochs);
  else
    s = "none";
  if (c.warmup_steps > 0) s += fmt::format(", warm-up {} steps", c.warmup_steps);
  return s;
}

}  // namespace anvil::tools
