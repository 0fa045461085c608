// SPDX-License-Identifier: Apache-2.0
#pragma once
// Training checkpoints: a model's parameters and buffers, an optimizer's state (its parameter
// groups included), a learning-rate scheduler's state and the default random generator, in one
// safetensors file (engine/core/safetensors.h), written atomically.
//   optim::save_checkpoint("run/ckpt.safetensors", *net, &opt, &sched, {{"epoch", "3"}});
//   auto info = optim::load_checkpoint("run/ckpt.safetensors", *net, &opt, &sched);  // resume
// Layout (docs/checkpoints.md): tensors "model.<parameter or buffer name>" and
// "optim.<Optimizer::state() name>"; metadata "anvil.format_version", "anvil.rng.default" (the
// default generator), "optim.<Optimizer::state_metadata() key>",
// "scheduler.<LRScheduler::state_metadata() key>", the loss scaler's
// "anvil.grad_scaler.<GradScaler::state_metadata() key>" (when given) and the caller's extra keys.
#include <map>
#include <string>

#include "engine/nn/module.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/optim/optimizer.h"

namespace anvil::optim {

class GradScaler;  // engine/optim/grad_scaler.h

inline constexpr int kCheckpointFormatVersion = 1;

struct CheckpointInfo {
  int format_version = 0;
  std::string optimizer;                        // "SGD", "Adam", "AdamW"; empty without one
  std::string scheduler;                        // "StepLR", ...; empty when saved without one
  std::map<std::string, std::string> extra;     // the extra_metadata given to save_checkpoint
  std::map<std::string, std::string> metadata;  // the file's whole metadata
};

// Saves `model` (and `opt`, `scheduler` unless null) to `path` atomically (Note [Atomic save]).
// Extra keys must not start with "anvil.", "optim." or "scheduler." (reserved). `scaler`, unless
// null, adds the loss scaler's state (scale, options, counters). Throws anvil::Error naming the
// problem.
void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer* opt,
                     const LRScheduler* scheduler,
                     const std::map<std::string, std::string>& extra_metadata = {},
                     const GradScaler* scaler = nullptr);
void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer* opt,
                     const std::map<std::string, std::string>& extra_metadata = {},
                     const GradScaler* scaler = nullptr);

// Restores `model` (its parameters and buffers are overwritten in place, so an optimizer built
// over them stays valid), `opt` (unless null; its options, counters and state tensors) and the
// default generator (anvil::default_generator(), which dropout draws from without a generator
// of its own). Everything is checked first, so on an error nothing is changed: every model
// tensor must be in the file with the same shape and dtype and the file must hold no other
// model tensor; the optimizer must be of the saved type over as many parameters of the same
// shapes; the scheduler (unless null) of the saved type over as many groups. `scaler`, unless
// null, gets the saved loss-scaler state, which the file must hold. Returns the metadata.
CheckpointInfo load_checkpoint(const std::string& path, nn::Module& model, Optimizer* opt,
                               LRScheduler* scheduler, GradScaler* scaler = nullptr);
CheckpointInfo load_checkpoint(const std::string& path, nn::Module& model, Optimizer* opt,
                               GradScaler* scaler = nullptr);

// The metadata of a checkpoint without reading its tensors (e.g. the model name the caller
// stored in the extra metadata, to build the model before load_checkpoint).
CheckpointInfo read_checkpoint_info(const std::string& path);

}  // namespace anvil::optim
