// SPDX-License-Identifier: Apache-2.0
#pragma once
// One training epoch of `anvil train` (trainer.cpp's run_training): a classifier's epoch over its
// loader in --accumulate micro-batches per step, or a language model's epoch of truncated BPTT
// over a token stream; each step clips (--clip), scales (--precision fp16), steps the optimizer
// and the schedule, and is checked for divergence.
#include <cstdint>
#include <ostream>
#include <utility>
#include <vector>

#include "data/loader.h"
#include "engine/core/device.h"
#include "engine/core/tensor.h"
#include "engine/distributed/data_parallel.h"
#include "engine/nn/module.h"
#include "engine/optim/grad_scaler.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/optim/optimizer.h"
#include "models/registry.h"
#include "tools/anvil/divergence.h"
#include "tools/anvil/fault_hook.h"
#include "tools/anvil/trainer.h"

namespace anvil::tools {

// `t` on `device`: the loader's host batches are copied to the GPU (pinned staging for large
// ones, Note [Pinned staging]) and the GPU's logits back to the host for the accuracy count;
// a tensor already there is returned as is (no copy on a CPU run).
Tensor on_device(const Tensor& t, Device device);

// One epoch's training loop over the classifier's loader, --accumulate micro-batches per step
// (Note [Global batch and micro-batches]); returns (mean loss, samples).
std::pair<double, std::int64_t> train_classifier_epoch(
    const TrainConfig& c, const models::ModelInfo& info, nn::Module& net, optim::Optimizer& opt,
    optim::LRScheduler* sched, data::DataLoader& loader, int epoch, Device device,
    std::ostream& out, dist::DataParallel* dp, DivergenceGuard& guard, FaultHook& faults,
    optim::GradScaler* scaler);

// One epoch of truncated BPTT over the token stream; returns (mean loss per token, tokens).
// `batch` is the global batch of streams; under data parallelism this rank trains on its rows of
// it and carries their state (Note [Sharded PTB streams]), and the gradients are averaged.
std::pair<double, std::int64_t> train_language_model_epoch(
    const TrainConfig& c, const models::ModelInfo& info, nn::Module& net, optim::Optimizer& opt,
    optim::LRScheduler* sched, const std::vector<std::int64_t>& ids, std::int64_t batch, int epoch,
    Device device, std::ostream& out, dist::DataParallel* dp, DivergenceGuard& guard,
    FaultHook& faults, optim::GradScaler* scaler);

}  // namespace anvil::tools
