// SPDX-License-Identifier: Apache-2.0
// The timing method's steps (models/training_step.h).
#include "models/training_step.h"

#include <chrono>
#include <cmath>
#include <sstream>
#include <string_view>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/cuda_backend.h"
#include "engine/core/error.h"
#include "engine/core/parse_number.h"

namespace anvil::models {

Batch synthetic_batch(const ModelInfo& info, std::int64_t batch, Generator& gen) {
  ANVIL_CHECK(batch > 0, "synthetic_batch", "batch must be positive, got ", batch);
  Shape shape = info.sample_shape;
  shape.insert(shape.begin(), batch);
  Batch b;
  if (info.input == InputKind::tokens) {
    ANVIL_CHECK(info.vocab_size > 0, "synthetic_batch", info.name,
                " takes tokens but has no vocab_size");
    b.input = randint(shape, 0, info.vocab_size, DType::i64, &gen);
  } else {
    b.input = normal(shape, 0, 1, DType::f32, &gen);
  }
  switch (info.loss) {
    case LossKind::cross_entropy:
      b.target = randint({batch}, 0, info.num_classes, DType::i64, &gen);
      break;
    case LossKind::sequence_cross_entropy:
      b.target = randint(shape, 0, info.num_classes, DType::i64, &gen);
      break;
    case LossKind::binary_cross_entropy:
      b.target = randint({batch, 1}, 0, 2, DType::i64, &gen).to(DType::f32);
      break;
  }
  return b;
}

Tensor model_loss(const ModelInfo& info, const Tensor& output, const Tensor& target) {
  switch (info.loss) {
    case LossKind::cross_entropy:
      return cross_entropy(output, target);
    case LossKind::sequence_cross_entropy: {
      // networks.md: CE summed over the T steps and averaged over B; output is [B*T, V] in the
      // order of target [B, T] flattened.
      ANVIL_CHECK(target.dim() == 2, "model_loss", info.name, ": expected targets [B, T], got ",
                  shape_str(target.sizes()));
      return cross_entropy(output, target.flatten()) * static_cast<double>(target.sizes()[1]);
    }
    case LossKind::binary_cross_entropy:
      return binary_cross_entropy_with_logits(output, target);
  }
  fail("model_loss", "unknown loss kind for ", info.name);
}

Tensor model_forward_loss(const ModelInfo& info, nn::Module& net, const Tensor& input,
                          const Tensor& target) {
  // Note [Sequence-model hooks]: a language model offers its fused loss.
  if (info.loss == LossKind::sequence_cross_entropy && net.has_sequence_loss())
    return net.sequence_loss(input, target);
  return model_loss(info, net.forward(input), target);
}

TimingSgd parse_timing_sgd(const std::string& description) {
  std::istringstream in(description);
  std::string word;
  in >> word;
  ANVIL_CHECK(word == "sgd", "parse_timing_sgd", "expected \"sgd ...\", got \"", description, "\"");
  TimingSgd s;
  while (in >> word) {
    const auto eq = word.find('=');
    ANVIL_CHECK(eq != std::string::npos, "parse_timing_sgd", "expected key=value, got \"", word,
                "\" in \"", description, "\"");
    const std::string key = word.substr(0, eq);
    const auto parsed = parse_number<double>(std::string_view(word).substr(eq + 1));
    ANVIL_CHECK(parsed.has_value() && std::isfinite(*parsed), "parse_timing_sgd",
                "bad number in \"", word, "\" of \"", description, "\"");
    const double value = *parsed;
    if (key == "lr")
      s.lr = value;
    else if (key == "momentum")
      s.momentum = value;
    else if (key == "clip")
      s.clip_norm = value;
    else
      fail("parse_timing_sgd", "unknown key \"", key, "\" in \"", description, "\"");
  }
  return s;
}

TimingSgd timing_sgd_for(const ModelInfo& info) {
  if (info.optimizer.rfind("sgd", 0) == 0) return parse_timing_sgd(info.optimizer);
  TimingSgd s;
  const auto pos = info.optimizer.find("lr=");
  if (pos != std::string::npos) {
    // The number runs to the next space ("adam lr=0.001 ...").
    const std::string_view rest = std::string_view(info.optimizer).substr(pos + 3);
    const auto lr = parse_number<double>(rest.substr(0, rest.find(' ')));
    ANVIL_CHECK(lr.has_value() && *lr > 0, "timing_sgd_for", "bad lr in \"", info.optimizer,
                "\" of model ", info.name);
    s.lr = *lr;
  }
  return s;
}

const char* batch_source_name(BatchSource source) {
  switch (source) {
    case BatchSource::pageable:
      return "pageable";
    case BatchSource::pinned:
      return "pinned";
    case BatchSource::resident:
      return "resident";
  }
  return "?";
}

BatchSource parse_batch_source(const std::string& name) {
  for (BatchSource s : {BatchSource::pageable, BatchSource::pinned, BatchSource::resident})
    if (name == batch_source_name(s)) return s;
  fail("parse_batch_source", "unknown batch source \"", name,
       "\" (expected pageable, pinned or resident)");
}

namespace {
// A page-locked host copy of `t` (Note [Pinned batches]).
Tensor pinned_copy(const Tensor& t) {
  Tensor p =
      Tensor::empty_in(require_cuda("TrainingStep").pinned_host_allocator(), t.sizes(), t.dtype());
  p.copy_(t);
  return p;
}

// dst (device) = src (host), on the device's copy stream, not waited for.
void copy_async(const Tensor& dst, const Tensor& src) {
  require_cuda("TrainingStep::upload_batch")
      .copy_to_device_async(dst.device().index, dst.data_ptr(), src.data_ptr(), src.nbytes());
}
}  // namespace

TrainingStep::TrainingStep(const std::string& model, std::int64_t batch, std::uint64_t seed,
                           bool fold_sgd, Device device, BatchSource source)
    : info_(&models::info(model)), batch_size_(batch), device_(device), source_(source) {
  if (device_.is_cuda()) {
    ANVIL_CHECK(info_->gpu_path, "TrainingStep", "model ", model,
                " has no GPU path (some of its ops have "
                "CPU kernels only; ModelInfo::gpu_path); run it on the CPU");
    require_cuda("TrainingStep");
  }
  ModelOptions options;
  options.seed = seed;
  net_ = create(model, options);
  Generator gen(seed + 1);
  batch_ = synthetic_batch(*info_, batch, gen);
  if (device_.is_cuda()) {
    // Initialised on the host (same weights and data as a CPU run of this seed), then moved
    // before the optimizer takes the parameter handles (nn::Module::to).
    net_->to(device_);
    host_batch_ = batch_;
    batch_.input = host_batch_.input.to(device_);
    batch_.target = host_batch_.target.to(device_);
    if (source_ == BatchSource::pinned) {
      host_batch_.input = pinned_copy(host_batch_.input);
      host_batch_.target = pinned_copy(host_batch_.target);
      slots_[0] = batch_;
      slots_[1].input = Tensor::empty(batch_.input.sizes(), batch_.input.dtype(), device_);
      slots_[1].target = Tensor::empty(batch_.target.sizes(), batch_.target.dtype(), device_);
      // Slot 0 holds the batch already (the .to() above); slot 1's copy is issued by the first
      // upload_batch().
    }
  }
  sgd_ = timing_sgd_for(*info_);
  optim::SGDOptions o;
  o.lr = sgd_.lr;
  o.momentum = sgd_.momentum;
  optimizer_ = std::make_unique<optim::SGD>(net_->parameters(), o);
  if (fold_sgd && sgd_.momentum == 0 && sgd_.clip_norm == 0) optimizer_->fold_into_backward();
}

void TrainingStep::forward_loss() {
  net_->train(true);
  loss_ = model_forward_loss(*info_, *net_, batch_.input, batch_.target);
}

void TrainingStep::backward() {
  ANVIL_CHECK(loss_.defined(), "TrainingStep::backward", "call forward_loss() first");
  loss_.backward();
}

void TrainingStep::update() {
  // On a GPU the norm is computed and applied on the device (no host wait inside the step).
  if (sgd_.clip_norm > 0) (void)optim::clip_grad_norm_async_(net_->parameters(), sgd_.clip_norm);
  optimizer_->step();
  optimizer_->zero_grad();
}

void TrainingStep::upload_batch() {
  if (!device_.is_cuda()) return;
  switch (source_) {
    case BatchSource::resident:
      return;
    case BatchSource::pageable:
      batch_.input.copy_(host_batch_.input);
      batch_.target.copy_(host_batch_.target);
      return;
    case BatchSource::pinned: {
      // Note [Pinned batches]. The copy of this step's batch was issued one step ago (slot 0's
      // first batch by the constructor); the device's stream waits for it, then the copy of the
      // next batch goes to the other slot. That copy first waits, on the device, for the work
      // queued so far (the previous step read that slot), and runs beside this step's kernels.
      // The synthetic batch is the same every step, so every copy moves the same bytes.
      CudaBackend& be = require_cuda("TrainingStep::upload_batch");
      if (next_issued_) slot_ ^= 1;
      be.wait_for_copies(device_.index);
      batch_ = slots_[slot_];
      Batch& next = slots_[slot_ ^ 1];
      copy_async(next.input, host_batch_.input);
      copy_async(next.target, host_batch_.target);
      next_issued_ = true;
      return;
    }
  }
}

void TrainingStep::synchronize() {
  if (device_.is_cuda()) require_cuda("TrainingStep::synchronize").synchronize(device_.index);
}

// Note [Host enqueue time]
// On a GPU a step's host thread only dispatches and enqueues: the step's wall time is the larger
// of the host's work and the device's. The host's share (wall time up to the final wait) tells
// whether a step is launch-bound: when it approaches the step time, the GPU waits for the host
// (per-op dispatch, descriptor set-up, allocation), which faster kernels cannot fix. On the CPU
// the two are the same. The GPU benchmarks report it as host_enqueue_ms.
namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

void TrainingStep::train_step() {
  const auto t0 = std::chrono::steady_clock::now();
  upload_batch();
  forward_loss();
  backward();
  update();
  enqueue_seconds_ = seconds_since(t0);
  synchronize();
}

void TrainingStep::inference_step() {
  const auto t0 = std::chrono::steady_clock::now();
  upload_batch();
  net_->train(false);
  {
    NoGradGuard no_grad;
    Tensor out = net_->forward(batch_.input);
    (void)out;
  }
  enqueue_seconds_ = seconds_since(t0);
  synchronize();
}

double TrainingStep::last_loss() const {
  ANVIL_CHECK(loss_.defined(), "TrainingStep::last_loss", "no forward_loss() yet");
  return loss_.item();
}

double TrainingStep::forward_flops() const {
  Shape shape = info_->sample_shape;
  shape.insert(shape.begin(), batch_size_);
  return net_->forward_flops(shape);
}

}  // namespace anvil::models
