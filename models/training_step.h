// SPDX-License-Identifier: Apache-2.0
#pragma once
// The timing method's steps for a registered model (networks.md, "How a step is timed"), shared
// by the benchmarks, the tests and the comparison tools, so that every one of them times the
// same work:
//   models::TrainingStep step("resnet50", /*batch=*/16);
//   step.train_step();       // forward + loss + backward + (clip) + SGD update
//   step.inference_step();   // forward under NoGradGuard
// The phases can also be run one by one (forward_loss, backward, update) to time them apart.
// On a GPU (`device` = cuda:N) the model lives on the device and a whole step also copies the
// batch host -> device first and waits for the device at the end, as the timing method says;
// the synthetic batch is drawn on the host exactly as on the CPU, so both devices see the same
// weights and data for one seed.
#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/random.h"
#include "engine/optim/optimizer.h"
#include "models/registry.h"

namespace anvil::models {

// One mini-batch: inputs and targets in the form the model's loss expects.
struct Batch {
  Tensor input;   // features [B, sample_shape...] (f32) or token ids [B, T] (i64)
  Tensor target;  // class ids [B] or [B, T] (i64), or 0/1 labels [B, 1] (f32)
};

// Synthetic data of the timing method: N(0, 1) features or uniform token ids, uniform labels.
Batch synthetic_batch(const ModelInfo& info, std::int64_t batch, Generator& gen);

// The model's training loss for `output = net(batch.input)` (LossKind of the model).
Tensor model_loss(const ModelInfo& info, const Tensor& output, const Tensor& target);
// model_loss(info, net.forward(input), target), the value and gradients alike, except that a
// language model with a fused loss (net.has_sequence_loss(): models::LstmLanguageModel) runs its
// decoder and loss as one node (Note [Sequence-model hooks], Note [Linear cross-entropy]). For
// training; evaluation that also needs the logits (accuracy) calls forward and model_loss.
Tensor model_forward_loss(const ModelInfo& info, nn::Module& net, const Tensor& input,
                          const Tensor& target);

// The timing method's optimizer, read from ModelInfo::optimizer ("sgd lr=1.0 clip=5"): plain
// SGD with the given learning rate (0.01 when absent), momentum and global-norm clipping.
// Throws for a description that is not "sgd ..." (use `timing_optimizer_for` for those).
struct TimingSgd {
  double lr = 0.01;
  double momentum = 0.0;
  double clip_norm = 0.0;  // 0 = no clipping
};
TimingSgd parse_timing_sgd(const std::string& optimizer_description);
// The timing method uses plain SGD for every model: the model's own description when it is SGD,
// otherwise SGD at the same learning rate (real-data optimizers such as Adam belong to
// `anvil train`, not to the DLBench step).
TimingSgd timing_sgd_for(const ModelInfo& info);

// Where a GPU step's batch comes from (the "step definition" of the GPU benchmarks; on the CPU
// there is one definition and this is ignored):
//   pageable: the batch is copied from ordinary host memory at the start of every step, and
//             the copy is waited for (the definition of the first GPU run);
//   pinned:   the batch lives in page-locked host memory and is copied asynchronously on the
//             device's copy stream, one step ahead (double buffering, ordered by events:
//             Note [Pinned batches] in data/loader.h): step k computes on the batch whose copy
//             was issued during step k-1 while the copy of batch k+1 runs; the default;
//   resident: the batch is already on the GPU; no copy at all.
enum class BatchSource : std::uint8_t { pageable, pinned, resident };
const char* batch_source_name(BatchSource source);        // "pageable", "pinned", "resident"
BatchSource parse_batch_source(const std::string& name);  // throws for an unknown name

// fold_sgd: with plain SGD (no momentum, no clipping), fold the update into backward
// (Note [Folded SGD]): same parameters after the step, one pass over the weights fewer.
class TrainingStep {
 public:
  TrainingStep(const std::string& model, std::int64_t batch, std::uint64_t seed = 1,
               bool fold_sgd = true, Device device = Device::cpu(),
               BatchSource source = BatchSource::pinned);

  void forward_loss();  // forward + loss, recording the graph
  void backward();      // loss.backward(); needs forward_loss() first
  void update();        // clipping (if any) + SGD step + zero_grad
  // GPU: makes batch() the step's batch on the device, as source() says (pageable: copy and
  // wait; pinned: the device waits for the copy issued one step ahead, and the next copy is
  // issued; resident: nothing); CPU: nothing.
  void upload_batch();
  // GPU: waits for the device's work to finish; CPU: nothing.
  void synchronize();
  void train_step();      // upload_batch + forward_loss + backward + update + synchronize
  void inference_step();  // upload_batch + forward, eval mode, no graph (+ sync)
  // Host seconds of the last train_step() or inference_step() before its final synchronize():
  // the time the host spends dispatching and enqueueing a step (Note [Host enqueue time]).
  double last_enqueue_seconds() const { return enqueue_seconds_; }

  nn::Module& net() { return *net_; }
  const ModelInfo& info() const { return *info_; }
  const Batch& batch() const { return batch_; }  // on device()
  Device device() const { return device_; }
  BatchSource source() const { return source_; }
  double last_loss() const;  // loss of the last forward_loss()
  // Forward FLOPs of one step's batch (2 per multiply-add).
  double forward_flops() const;
  bool sgd_folded() const { return optimizer_->folded(); }
  optim::SGD& optimizer() { return *optimizer_; }  // data parallelism turns folding off

 private:
  const ModelInfo* info_;
  std::int64_t batch_size_;
  Device device_;
  nn::ModulePtr net_;
  BatchSource source_ = BatchSource::pinned;
  Batch host_batch_;          // GPU only: the batch on the host (page-locked when pinned)
  Batch batch_;               // on device(); pinned: one of slots_
  Batch slots_[2];            // pinned: the two device buffers of the double buffering
  int slot_ = 0;              // pinned: the slot batch_ is
  bool next_issued_ = false;  // pinned: the copy into slots_[slot_ ^ 1] has been issued
  TimingSgd sgd_;
  std::unique_ptr<optim::SGD> optimizer_;
  Tensor loss_;
  double enqueue_seconds_ = 0;
};

}  // namespace anvil::models
