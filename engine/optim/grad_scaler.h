// SPDX-License-Identifier: Apache-2.0
#pragma once
// Dynamic loss scaling for float16 mixed-precision training, with the semantics of PyTorch's
// torch.amp.GradScaler (Note [Dynamic loss scaling]). One step:
//   opt.zero_grad();
//   scaler.scale(loss).backward();     // gradients of loss x S
//   scaler.unscale_(opt);              // optional: only needed before clipping or reading them
//   optim::clip_grad_norm_(opt.params(), 1.0);
//   scaler.step(opt);                  // unscales if not done; skipped when a gradient is inf/NaN
//   scaler.update();                   // backs S off after a skipped step, grows it after
//                                      // growth_interval finite steps in a row
// The scale lives on the host; the gradients may live on any device the optimizer tables serve.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/optim/optimizer.h"

namespace anvil::optim {

// Note [Dynamic loss scaling]
// float16 has 5 exponent bits: its smallest normal number is 6.1e-5 and its subnormals end at
// 6.0e-8, so many gradients of an f16 backward pass (autocast GEMMs in f16) flush to zero. The
// chain rule is linear, so multiplying the loss by S multiplies every gradient of the backward by
// S, lifting them into f16's range; the gradients that reach the f32 master weights are divided
// by S again before the optimizer sees them, so the update is the one of the unscaled loss. A
// scale that is too large overflows some f16 value to inf (or makes a NaN of inf - inf); that
// step is skipped (parameters and optimizer state untouched, Adam's step count included) and S
// is multiplied by backoff_factor. After growth_interval finite steps in a row S is multiplied
// by growth_factor, so S keeps probing the largest scale that does not overflow. Unscaling and
// the overflow check are one pass over the gradients (the grad_scale table with its found_inf
// flag, optim::unscale_grads_), and step() reads that flag once: the one host wait of a step
// (one per device the gradients live on), as in PyTorch. The scale is kept as a double and only
// grown while it stays a finite f32, the type of the loss it multiplies. bf16 keeps f32's
// exponent range and needs no scaling. Clipping belongs between unscale_ and step, so that it
// sees (and clips) the true gradients; a skipped step's gradient norm is inf or NaN and means
// nothing.

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16, PyTorch's default
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  // Throws anvil::Error naming the option and its value when init_scale is not a positive finite
  // number, growth_factor is not > 1, backoff_factor is not in (0, 1) or growth_interval < 1.
  explicit GradScaler(GradScalerOptions options = {});

  // loss x scale, recorded by autograd (call backward() on the result).
  Tensor scale(const Tensor& loss) const;
  // Divides every gradient of opt's parameters by the scale, in place, and records (without
  // waiting) whether any is inf or NaN. At most once between two update() calls.
  void unscale_(Optimizer& opt);
  // Unscales first unless unscale_ was called, then runs opt.step() unless a gradient was
  // non-finite. Returns whether the optimizer stepped. Once between two update() calls.
  bool step(Optimizer& opt);
  // Adjusts the scale after step() (Note [Dynamic loss scaling]).
  void update();

  double get_scale() const { return scale_; }
  const GradScalerOptions& options() const { return opt_; }
  // Finite steps since the last back-off or growth (torch's _growth_tracker).
  std::int64_t growth_tracker() const { return growth_tracker_; }
  // Steps skipped over the scaler's life (restored from checkpoints).
  std::int64_t skipped_steps() const { return skipped_steps_; }
  // Whether the last step() found a non-finite gradient (and skipped).
  bool last_step_skipped() const { return last_skipped_; }

  // ---- state for checkpoints (engine/optim/checkpoint.h) -----------------------------------
  // Scalars as text: "scale", the options, "growth_tracker", "skipped_steps"; doubles read back
  // to the same bits.
  std::map<std::string, std::string> state_metadata() const;
  // Restores what state_metadata() returned, options included; checks everything first and
  // throws anvil::Error naming the key and the value, leaving the scaler unchanged.
  void load_state(const std::map<std::string, std::string>& metadata);

 private:
  enum class Stage : std::uint8_t { ready, unscaled, stepped };

  GradScalerOptions opt_;
  double scale_;
  std::int64_t growth_tracker_ = 0;
  std::int64_t skipped_steps_ = 0;
  bool last_skipped_ = false;
  Stage stage_ = Stage::ready;
  std::vector<Tensor> found_inf_;  // per device, from unscale_ until step() reads them
};

}  // namespace anvil::optim
