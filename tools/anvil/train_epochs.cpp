// SPDX-License-Identifier: Apache-2.0
// One training epoch of `anvil train` (train_epochs.h): the step's micro-batches, backward (scaled
// under fp16), gradient averaging, clipping, the optimizer and schedule steps, the divergence
// check.
#include "tools/anvil/train_epochs.h"

#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "data/ptb.h"
#include "engine/autograd/functions.h"
#include "models/training_step.h"
#include "tools/anvil/progress.h"

namespace anvil::tools {

Tensor on_device(const Tensor& t, Device device) { return t.device() == device ? t : t.to(device); }

namespace {

// --clip: the gradients' global norm before clipping (a device scalar, read after the step so
// that the step does not wait for it); nothing without --clip.
std::optional<Tensor> clip_gradients(const TrainConfig& c, optim::Optimizer& opt) {
  if (c.clip_norm <= 0) return std::nullopt;
  return optim::clip_grad_norm_async_(opt.params(), c.clip_norm);
}
std::optional<double> read_norm(const std::optional<Tensor>& norm) {
  return norm ? std::optional<double>(norm->item()) : std::nullopt;
}

// --precision fp16 (Note [Dynamic loss scaling]): backward of the loss times the scale; the
// gradients are unscaled (and checked for overflow) before clipping, and the step is skipped
// when one is inf or NaN. Without a scaler these are the plain calls.
void backward_scaled(const Tensor& objective, optim::GradScaler* scaler) {
  if (scaler != nullptr)
    scaler->scale(objective).backward();
  else
    objective.backward();
}
// Clips (--clip) and steps; returns the gradient norm (--clip) of a step that ran, nothing when
// the scaler skipped it (its norm is that of an overflow, no sign of divergence).
std::optional<double> clip_and_step(const TrainConfig& c, optim::Optimizer& opt,
                                    optim::GradScaler* scaler, dist::DataParallel* dp) {
  if (scaler != nullptr) scaler->unscale_(opt);  // clipping sees the true gradients
  const std::optional<Tensor> norm = clip_gradients(c, opt);
  bool stepped = true;
  if (scaler != nullptr) {
    stepped = scaler->step(opt);
    scaler->update();
  } else {
    opt.step();
  }
  if (dp != nullptr) dp->finish_update();  // ZeRO-1: the updated blocks to every rank
  return stepped ? read_norm(norm) : std::nullopt;
}

// Note [Global batch and micro-batches]
// --batch B is the global batch of one optimizer step, whatever the rank count S and
// --accumulate N: each rank's loader gives micro-batches of B / (S N) samples (Note [Sharded
// epochs]), N consecutive ones form the rank's share of a step, so the step covers the same B
// samples of the epoch's permutation as one process at batch B. Each micro-batch's mean loss is
// weighted by rows_i / rows of the rank's step (1/N when they are equal), the ranks' equal shares
// are averaged by the all-reduce, and the step's gradient is the mean over the B samples, as one
// process at batch B computes it, up to rounding. The first N - 1 backward passes run under
// DataParallel::no_sync() (Note [Accumulation without synchronisation]): one all-reduce per
// step. An epoch's last step takes the micro-batches that are left (fewer, and the last one
// possibly smaller), weighted by their rows: the same samples as one process's last batch. Not
// equal to one process at batch B: a model whose forward depends on the batch (batch norm's
// batch statistics, per micro-batch here) or on how many masks are drawn per call (dropout).
// Language models are refused (their rows carry state across windows). B must be divisible by
// S N; "batch per rank" in the logs is B / S, the micro-batch is printed beside it.

// Up to `n` batches of `loader` into `out`; false when the epoch had none left.
bool next_micro_batches(data::DataLoader& loader, int n, std::vector<data::LoadedBatch>& out) {
  out.clear();
  while (static_cast<int>(out.size()) < n) {
    auto b = loader.next();
    if (!b) break;
    out.push_back(std::move(*b));
  }
  return !out.empty();
}

}  // namespace

std::pair<double, std::int64_t> train_classifier_epoch(
    const TrainConfig& c, const models::ModelInfo& info, nn::Module& net, optim::Optimizer& opt,
    optim::LRScheduler* sched, data::DataLoader& loader, int epoch, Device device,
    std::ostream& out, dist::DataParallel* dp, DivergenceGuard& guard, FaultHook& faults,
    optim::GradScaler* scaler) {
  net.train();
  loader.start_epoch(epoch);
  Progress progress(out, c.progress_bar, fmt::format("epoch {}/{}", epoch + 1, c.epochs),
                    (loader.batches_per_epoch() + c.accumulate - 1) / c.accumulate);
  double loss_sum = 0;
  std::int64_t n = 0, step = 0;
  std::vector<data::LoadedBatch> micro;  // this step's micro-batches
  while (next_micro_batches(loader, c.accumulate, micro)) {
    faults.before_step();
    opt.zero_grad();
    std::int64_t rows = 0;
    for (const auto& b : micro) rows += b.inputs.sizes()[0];
    // The step's loss is the mean over its `rows` samples: micro-batch i weighs rows_i / rows.
    std::vector<std::pair<Tensor, double>> losses;
    for (std::size_t i = 0; i < micro.size(); ++i) {
      std::optional<dist::DataParallel::NoSync> local;  // all but the last: no all-reduce
      if (dp != nullptr && i + 1 < micro.size()) local.emplace(dp->no_sync());
      Tensor loss = models::model_forward_loss(info, net, on_device(micro[i].inputs, device),
                                               on_device(micro[i].targets, device));
      const double weight =
          static_cast<double>(micro[i].inputs.sizes()[0]) / static_cast<double>(rows);
      backward_scaled(micro.size() == 1 ? loss : loss * weight, scaler);
      losses.emplace_back(std::move(loss), weight);
    }
    if (dp != nullptr) dp->finish_gradients();  // averaged over the ranks before clipping
    const std::optional<double> norm = clip_and_step(c, opt, scaler, dp);
    if (sched != nullptr) sched->step();  // Note [Schedules in anvil train]
    double step_loss = 0;
    for (const auto& [loss, weight] : losses) step_loss += loss.item() * weight;
    guard.check_step(epoch + 1, step + 1, step_loss, norm);
    loss_sum += step_loss * static_cast<double>(rows);
    n += rows;
    progress.update(++step, loss_sum / static_cast<double>(n));
  }
  progress.finish();
  if (dp != nullptr) {  // the epoch's loss over all ranks' samples
    Tensor sums = Tensor::from_vector(std::vector<double>{loss_sum, static_cast<double>(n)}, {2});
    dp->comm().all_reduce(sums, dist::ReduceOp::sum);
    loss_sum = sums.data<double>()[0];
    n = static_cast<std::int64_t>(std::llround(sums.data<double>()[1]));
  }
  return {loss_sum / static_cast<double>(n), n};
}

std::pair<double, std::int64_t> train_language_model_epoch(
    const TrainConfig& c, const models::ModelInfo& info, nn::Module& net, optim::Optimizer& opt,
    optim::LRScheduler* sched, const std::vector<std::int64_t>& ids, std::int64_t batch, int epoch,
    Device device, std::ostream& out, dist::DataParallel* dp, DivergenceGuard& guard,
    FaultHook& faults, optim::GradScaler* scaler) {
  net.train();
  net.reset_state();  // Note [Sequence-model hooks]
  const std::int64_t seq_len = info.sample_shape.at(0);
  data::PtbBatcher batches(ids, batch, seq_len);
  Progress progress(out, c.progress_bar, fmt::format("epoch {}/{}", epoch + 1, c.epochs),
                    batches.num_batches());
  double nll = 0;
  std::int64_t tokens = 0, step = 0;
  const int ranks = dp != nullptr ? dp->comm().size() : 1;
  const int rank = dp != nullptr ? dp->comm().rank() : 0;
  while (batches.has_next()) {
    const data::PtbBatch b = data::shard_rows(batches.next(), ranks, rank);
    faults.before_step();
    opt.zero_grad();
    // networks.md's loss: CE summed over the steps of the window, averaged over the batch.
    Tensor loss = models::model_forward_loss(info, net, on_device(b.inputs, device),
                                             on_device(b.targets, device));
    backward_scaled(loss, scaler);
    if (dp != nullptr) dp->finish_gradients();  // averaged over the ranks before clipping
    const std::optional<double> norm = clip_and_step(c, opt, scaler, dp);
    if (sched != nullptr) sched->step();  // Note [Schedules in anvil train]
    const std::int64_t t = b.targets.sizes()[1];
    const double step_loss = loss.item();
    guard.check_step(epoch + 1, step + 1, step_loss, norm);
    nll += step_loss / static_cast<double>(t) * static_cast<double>(b.targets.numel());
    tokens += b.targets.numel();
    progress.update(++step, nll / static_cast<double>(tokens));
  }
  progress.finish();
  net.reset_state();
  if (dp != nullptr) {  // the epoch's loss over all ranks' tokens
    Tensor sums = Tensor::from_vector(std::vector<double>{nll, static_cast<double>(tokens)}, {2});
    dp->comm().all_reduce(sums, dist::ReduceOp::sum);
    nll = sums.data<double>()[0];
    tokens = static_cast<std::int64_t>(std::llround(sums.data<double>()[1]));
  }
  return {nll / static_cast<double>(tokens), tokens};
}

}  // namespace anvil::tools
