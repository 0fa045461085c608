// SPDX-License-Identifier: Apache-2.0
#pragma once
// Note [Divergence]
// A run whose loss or gradient norm becomes NaN or infinite has diverged: from then on every
// step computes on non-finite weights, and before this guard such a run exited 0 and wrote NaN
// weights over --checkpoint every epoch. Now, with --on-divergence stop (the default), the first
// step that sees a non-finite loss (or gradient norm, which --clip computes anyway) ends the run
// with an error naming the epoch, the step and the value (exit status 1). With continue the run
// trains on, and the JSON log records the first divergence. Either way a checkpoint is written
// only from finite parameters and buffers (all_finite), so --checkpoint keeps the last good
// epoch instead of NaN weights. The loss is read where the loop reads it anyway (item(), a host
// wait on a GPU), so the guard adds no wait to a step; the parameter scan is once per epoch.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/tensor.h"

namespace anvil::tools {

class DivergenceGuard {
 public:
  // checkpoint: the --checkpoint path ("" when none), for the message.
  DivergenceGuard(bool stop, std::string checkpoint)
      : stop_(stop), checkpoint_(std::move(checkpoint)) {}
  // One training step's loss and, when known, gradient norm (epoch and step 1-based). A
  // non-finite value throws anvil::Error when stopping, else is remembered (the first one).
  void check_step(int epoch, std::int64_t step, double loss, std::optional<double> grad_norm);
  // The first divergence seen ("epoch 2, step 17: loss nan"); empty while there was none.
  const std::optional<std::string>& first() const { return first_; }
  bool stops() const { return stop_; }
  // Records (or, when stopping, throws for) non-finite weights found at an epoch's end.
  void weights_not_finite(int epoch);

 private:
  void diverged(const std::string& what);
  bool stop_;
  std::string checkpoint_;
  std::optional<std::string> first_;
};

// True when every element of every floating-point tensor is finite (integer tensors are).
bool all_finite(const std::vector<Tensor>& tensors);

}  // namespace anvil::tools
