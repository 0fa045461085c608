// SPDX-License-Identifier: Apache-2.0
// The LSTM language model (models/lstm_language_model.h).
#include "models/lstm_language_model.h"

#include "engine/autograd/functions.h"

namespace anvil::models {

LstmLanguageModel::LstmLanguageModel(std::int64_t vocab, std::int64_t embed_dim,
                                     std::int64_t hidden, std::int64_t num_layers, bool two_biases,
                                     Generator* gen) {
  embedding_ = register_module("embedding", std::make_shared<nn::Embedding>(vocab, embed_dim, gen));
  lstm_ = register_module(
      "lstm", std::make_shared<nn::LSTM>(embed_dim, hidden, num_layers, two_biases, gen));
  decoder_ = register_module("decoder", std::make_shared<nn::Linear>(hidden, vocab, true, gen));
}

Tensor LstmLanguageModel::time_major_output(const Tensor& ids) {
  check_defined(ids, "LstmLanguageModel", "ids");
  ANVIL_CHECK(ids.dim() == 2, "LstmLanguageModel", "expected token ids [B, T], got ",
              shape_str(ids.sizes()));
  const std::int64_t B = ids.sizes()[0];
  // Gather straight into time-major order: x [T, B, E].
  Tensor x = embedding_->forward(ids.transpose(0, 1));
  if (!state_.empty() && state_.h.front().sizes()[0] != B) reset_state();
  auto [y, st] = lstm_->forward(x, carry_ ? state_ : nn::LstmState{});
  if (carry_) state_ = st.detached();
  return y;  // [T, B, H]
}

Tensor LstmLanguageModel::hidden_rows(const Tensor& ids) {
  Tensor y = time_major_output(ids);
  // [T, B, H] -> [B, T, H] -> [B*T, H]: rows follow targets.flatten() of [B, T].
  return y.transpose(0, 1).reshape({y.sizes()[0] * y.sizes()[1], lstm_->hidden_size()});
}

Tensor LstmLanguageModel::forward(const Tensor& ids) { return decoder_->forward(hidden_rows(ids)); }

Tensor LstmLanguageModel::sequence_loss(const Tensor& ids, const Tensor& targets) {
  check_defined(targets, "LstmLanguageModel::sequence_loss", "targets");
  ANVIL_CHECK(targets.dim() == 2 && ids.dim() == 2 && targets.sizes() == ids.sizes(),
              "LstmLanguageModel::sequence_loss",
              "expected ids and targets [B, T] of one shape, got ", shape_str(ids.sizes()), " and ",
              shape_str(targets.sizes()));
  // The loss is a sum over all (t, b): the rows may stay in the LSTM's time-major order (a view,
  // no [B*T, H] copy forward and backward) with the targets transposed to match.
  Tensor y = time_major_output(ids);
  Tensor rows = y.reshape({y.sizes()[0] * y.sizes()[1], lstm_->hidden_size()});
  return linear_cross_entropy(rows, decoder_->weight(), decoder_->bias(),
                              targets.transpose(0, 1).contiguous().flatten()) *
         static_cast<double>(targets.sizes()[1]);
}

std::string LstmLanguageModel::extra_repr() const {
  return detail::str_cat("vocab=", embedding_->num_embeddings(),
                         ", embed=", embedding_->embedding_dim(), ", hidden=", lstm_->hidden_size(),
                         ", layers=", lstm_->num_layers(),
                         ", carry_state=", carry_ ? "true" : "false");
}

Shape LstmLanguageModel::output_shape(const Shape& in) const {
  ANVIL_CHECK(in.size() == 2, "LstmLanguageModel", "expected [B, T], got ", shape_str(in));
  return {in[0] * in[1], embedding_->num_embeddings()};
}

double LstmLanguageModel::forward_flops(const Shape& in) const {
  const std::int64_t B = in[0], T = in[1];
  return lstm_->forward_flops({T, B, embedding_->embedding_dim()}) +
         decoder_->forward_flops({B * T, lstm_->hidden_size()});
}

void LstmLanguageModel::problems(const Shape& in, const std::string& prefix,
                                 std::vector<nn::NamedProblem>& out) const {
  lstm_->problems({in[1], in[0], embedding_->embedding_dim()}, prefix + "lstm.", out);
  decoder_->problems({in[0] * in[1], lstm_->hidden_size()}, prefix + "decoder.", out);
}

}  // namespace anvil::models
