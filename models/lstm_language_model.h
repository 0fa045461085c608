// SPDX-License-Identifier: Apache-2.0
#pragma once
// The word-level LSTM language model of lstm32, lstm64 and ptb_small (models/lstm.cpp):
// embedding -> LSTM stack -> linear decoder at every step, with truncated-BPTT state carrying.
// Training loops reach its state and its fused loss through nn::Module's sequence-model hooks
// (Note [Sequence-model hooks] in engine/nn/module.h), never through its type.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/random.h"
#include "engine/nn/layers.h"
#include "engine/nn/module.h"
#include "engine/nn/recurrent.h"

namespace anvil::models {

// ids [B, T] -> logits [B*T, V], rows in the order of targets.flatten() for next-token targets
// [B, T]. Embedding V x E, LSTM (E -> H, L layers), Linear H -> V at every step. When
// carry_state is on (default), the final LSTM state of one call, detached from the graph, is the
// initial state of the next (truncated BPTT); reset_state() starts again from zeros, and a
// batch-size change does so implicitly.
class LstmLanguageModel final : public nn::Module {
 public:
  LstmLanguageModel(std::int64_t vocab, std::int64_t embed_dim, std::int64_t hidden,
                    std::int64_t num_layers, bool two_biases = false, Generator* gen = nullptr);
  // ids [B, T] -> logits [B*T, V] (rows in targets.flatten() order).
  Tensor forward(const Tensor& ids) override;
  // The LSTM's output rows [B*T, H] before the decoder (state carried as in forward).
  Tensor hidden_rows(const Tensor& ids);
  // networks.md's loss for next-token targets [B, T]: softmax CE summed over T, averaged over
  // B; the decoder and the loss run as one linear_cross_entropy node (same value and gradients
  // as cross_entropy(forward(ids), targets.flatten()) * T, less memory and fewer passes).
  bool has_sequence_loss() const override { return true; }
  Tensor sequence_loss(const Tensor& ids, const Tensor& targets) override;
  std::string type_name() const override { return "LstmLanguageModel"; }
  std::string extra_repr() const override;
  Shape output_shape(const Shape& in) const override;
  double forward_flops(const Shape& in) const override;
  // The LSTM layers' problems, then the decoder's GEMMs.
  void problems(const Shape& in, const std::string& prefix,
                std::vector<nn::NamedProblem>& out) const override;

  void reset_state() override { state_ = {}; }
  void set_carry_state(bool on) {
    carry_ = on;
    if (!on) reset_state();
  }
  const nn::LstmState& state() const { return state_; }
  nn::Embedding& embedding() { return *embedding_; }
  nn::LSTM& lstm() { return *lstm_; }
  nn::Linear& decoder() { return *decoder_; }

 private:
  Tensor time_major_output(const Tensor& ids);  // embedding + LSTM: y [T, B, H]
  std::shared_ptr<nn::Embedding> embedding_;
  std::shared_ptr<nn::LSTM> lstm_;
  std::shared_ptr<nn::Linear> decoder_;
  nn::LstmState state_;
  bool carry_ = true;
};

}  // namespace anvil::models
