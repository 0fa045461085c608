// SPDX-License-Identifier: Apache-2.0
#pragma once
// Embedding and LSTM, with the recurrent state an LSTM stack carries (LstmState). The LSTM
// language model built from them is models::LstmLanguageModel (models/lstm_language_model.h).
#include <utility>
#include <vector>

#include "engine/core/random.h"
#include "engine/nn/module.h"

namespace anvil::nn {

// Lookup table weight [V, D]; forward(ids of any shape, int64/int32) -> [ids..., D].
// Init N(0, 1) as PyTorch's nn.Embedding.
class Embedding final : public Module {
 public:
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, Generator* gen = nullptr);
  Tensor forward(const Tensor& ids) override;
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;
  Shape output_shape(const Shape& in) const override;
  Tensor& weight() { return *weight_; }
  std::int64_t num_embeddings() const { return v_; }
  std::int64_t embedding_dim() const { return d_; }

 private:
  std::int64_t v_, d_;
  Tensor* weight_ = nullptr;
};

// Recurrent state of an LSTM stack: one h and one c [B, H] per layer (empty = zeros).
struct LstmState {
  std::vector<Tensor> h, c;
  bool empty() const { return h.empty(); }
  // The same values cut off from the graph (truncated BPTT).
  LstmState detached() const;
};

// A stack of single-direction LSTM layers over x [T, B, I] (time-major), gates (i, f, g, o).
// Parameters per layer l: weight_ih_l{l} [4H, I_l], weight_hh_l{l} [4H, H], bias_ih_l{l} [4H]
// and, with two_biases (PyTorch's nn.LSTM layout), bias_hh_l{l} [4H]. Init as PyTorch:
// everything U(-1/sqrt(H), 1/sqrt(H)). Each layer runs as one anvil::lstm_layer call, i.e. the
// selected "lstm" variant (ANVIL_VARIANT=lstm=cpu.fused etc.).
class LSTM final : public Module {
 public:
  LSTM(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1,
       bool two_biases = false, Generator* gen = nullptr);
  // y [T, B, H] of the last layer, from zero state.
  Tensor forward(const Tensor& x) override;
  // y and the final state, from `state` (empty = zeros).
  std::pair<Tensor, LstmState> forward(const Tensor& x, const LstmState& state);
  std::string type_name() const override { return "LSTM"; }
  std::string extra_repr() const override;
  Shape output_shape(const Shape& in) const override;
  double forward_flops(const Shape& in) const override;
  // One "lstm" problem (forward_training) per layer for input [T, B, I], named
  // "<prefix without trailing dot>.l0", ".l1", ...
  void problems(const Shape& in, const std::string& prefix,
                std::vector<NamedProblem>& out) const override;

  std::int64_t input_size() const { return in_; }
  std::int64_t hidden_size() const { return hidden_; }
  std::int64_t num_layers() const { return layers_; }
  bool two_biases() const { return two_biases_; }

 private:
  std::int64_t in_, hidden_, layers_;
  bool two_biases_;
};

}  // namespace anvil::nn
