// SPDX-License-Identifier: Apache-2.0
#pragma once
// The model zoo: networks of docs/spec/networks.md by name, with summaries and the kernel
// problems their layers generate (one source of truth for tests and kernel benchmarks).
//   auto net = anvil::models::create("fcn5");
//   auto s = anvil::models::summary("fcn5");   // params, FLOPs per sample, layer table
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/random.h"
#include "engine/nn/module.h"

namespace anvil::models {

// What a model consumes: float features [B, ...] with class-id targets [B] (images and FCN
// inputs), or token ids.
//
// Note [Token models]
// InputKind::tokens models take int64 ids [B, T] (sample_shape {T}).
//  * Language models (lstm32, lstm64, ptb_small; num_classes = V = 10000) return logits
//    [B*T, V] whose rows follow targets.flatten() for next-token targets [B, T], so
//    `cross_entropy(logits, targets.flatten()) * T` is networks.md's loss (summed over T,
//    averaged over B). They carry their LSTM state, detached, from one call to the next
//    (truncated BPTT); reset_state() starts from zeros again (Note [Sequence-model hooks]).
//  * lstm_imdb (num_classes = 1) returns one logit per sequence [B, 1]; the loss is
//    binary_cross_entropy_with_logits against float targets [B, 1] in {0, 1}.
enum class InputKind { features, tokens };

// The training loss: softmax CE over class ids [B]; the language models' CE over [B, T]
// next-token targets, summed over T and averaged over B; binary CE with logits on [B, 1].
enum class LossKind { cross_entropy, sequence_cross_entropy, binary_cross_entropy };

struct ModelOptions {
  std::int64_t num_classes = 0;  // 0 = the definition's default
  std::uint64_t seed = 1;        // parameter initialisation
};

struct ModelInfo {
  std::string name;
  std::string description;  // one line, from networks.md
  Shape sample_shape;       // input shape of one sample (no batch dim)
  InputKind input = InputKind::features;
  std::int64_t num_classes = 0;
  std::int64_t cpu_batch = 0;             // the paper's CPU mini-batch
  std::vector<std::int64_t> gpu_batches;  // the GPU sweep
  std::string optimizer;                  // the timing method's optimizer, e.g. "sgd lr=0.01"
  std::function<nn::ModulePtr(const ModelOptions&, Generator&)> build;
  LossKind loss = LossKind::cross_entropy;  // the training loss (models/training_step.h)
  std::int64_t vocab_size = 0;              // token models: ids are in [0, vocab_size)
  // Every op the model runs (forward, loss, backward, update) has a CUDA variant, so it trains
  // and infers on a GPU (TrainingStep, `anvil train --device cuda`, the GPU benchmarks). True for
  // every built-in model since conv, pooling, batch norm, embedding and LSTM have CUDA variants.
  bool gpu_path = false;
};

struct LayerRow {
  std::string name;    // "0", "fc1", ...
  std::string type;    // "Linear"
  std::string repr;    // "in=26752, out=2048, bias=true"
  Shape output_shape;  // for batch 1
  std::int64_t params = 0;
  double flops = 0;  // forward, per sample
};

struct ModelSummary {
  std::string name;
  std::int64_t params = 0;
  double flops_per_sample = 0;  // forward FLOPs (2 per multiply-add)
  std::vector<LayerRow> layers;
  std::string table() const;  // printable layer table
};

// Adds a model (done for the built-ins by the registry itself; user code may add its own).
void register_model(ModelInfo info);
std::vector<std::string> list();
const ModelInfo& info(const std::string& name);  // throws listing the known names
nn::ModulePtr create(const std::string& name, const ModelOptions& options = {});
ModelSummary summary(const std::string& name);
// The kernel problems of every layer at batch `batch` in forward order (nn::Module::problems):
// a Linear's forward, input-gradient and weight-gradient GEMMs ("fcn5:0.forward", ...), each
// convolution, pooling, batch norm ("resnet50:layer3.0.conv2") and LSTM layer
// ("lstm32:lstm.l0"). The problems are the CPU, f32 ones the model's layers build.
std::vector<nn::NamedProblem> problems(const std::string& name, std::int64_t batch);

}  // namespace anvil::models
