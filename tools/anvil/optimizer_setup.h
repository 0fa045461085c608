// SPDX-License-Identifier: Apache-2.0
#pragma once
// The optimizer and learning-rate schedule of `anvil train` (tools/anvil/trainer.h's
// TrainConfig): --optimizer sgd|adam|adamw, --weight-decay, --lr-schedule none|step|cosine,
// --step-epochs, --cosine-epochs, --warmup-steps. Their checks throw anvil::ConfigError naming
// the option and the value (exit status 2 in the CLI).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/optim/lr_scheduler.h"
#include "engine/optim/optimizer.h"
#include "tools/anvil/trainer.h"

namespace anvil::tools {

// The options above against their limits and each other (part of run_training's check_config).
void check_optimizer_config(const TrainConfig& c);

// --weight-decay, or the optimizer's default when it is not given.
double weight_decay_of(const TrainConfig& c);

// The optimizer over `params` (net->parameters() order). With weight decay, two groups
// (Note [Weight decay groups] in optimizer_setup.cpp); with --shard-optimizer one (its shards
// mix weights and biases; check_optimizer_config refuses decay there).
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, std::vector<Tensor> params);

// The scheduler of --lr-schedule and --warmup-steps, stepped after every optimizer step of a
// run of `steps_per_epoch` steps per epoch; null for the per-epoch --lr-decay alone.
std::unique_ptr<optim::LRScheduler> make_scheduler(const TrainConfig& c, optim::Optimizer& opt,
                                                   std::int64_t steps_per_epoch);

// The schedule in words ("cosine over 3 epochs, warm-up 100 steps"): printed, and compared when
// a run resumes (a checkpoint of another schedule is refused).
std::string schedule_description(const TrainConfig& c);

}  // namespace anvil::tools
