// SPDX-License-Identifier: Apache-2.0
// Embedding and LSTM (engine/nn/recurrent.h).
#include "engine/nn/recurrent.h"

#include <cmath>
#include <string>

#include "engine/autograd/functions.h"
#include "engine/dispatch/lstm_problem.h"
#include "engine/nn/init.h"

namespace anvil::nn {

// ---- Embedding
// -----------------------------------------------------------------------------------

Embedding::Embedding(std::int64_t v, std::int64_t d, Generator* gen) : v_(v), d_(d) {
  ANVIL_CHECK(v > 0 && d > 0, "Embedding", "sizes must be positive, got num_embeddings=", v,
              ", embedding_dim=", d);
  register_parameter("weight", normal({v, d}, 0.0, 1.0, DType::f32, gen));
  weight_ = &parameter("weight");
}

Tensor Embedding::forward(const Tensor& ids) { return embedding(*weight_, ids); }

std::string Embedding::extra_repr() const { return detail::str_cat("num=", v_, ", dim=", d_); }

Shape Embedding::output_shape(const Shape& in) const {
  Shape out = in;
  out.push_back(d_);
  return out;
}

// ---- LSTM
// ------------------------------------------------------------------------------------------

LstmState LstmState::detached() const {
  LstmState s;
  for (const Tensor& t : h) s.h.push_back(t.detach());
  for (const Tensor& t : c) s.c.push_back(t.detach());
  return s;
}

LSTM::LSTM(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers,
           bool two_biases, Generator* gen)
    : in_(input_size), hidden_(hidden_size), layers_(num_layers), two_biases_(two_biases) {
  ANVIL_CHECK(input_size > 0 && hidden_size > 0 && num_layers > 0, "LSTM",
              "sizes must be positive, got input_size=", input_size, ", hidden_size=", hidden_size,
              ", num_layers=", num_layers);
  const double k = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  const std::int64_t G = 4 * hidden_size;
  for (std::int64_t l = 0; l < num_layers; ++l) {
    const std::string s = std::to_string(l);
    const std::int64_t in = l == 0 ? input_size : hidden_size;
    register_parameter("weight_ih_l" + s, uniform({G, in}, -k, k, DType::f32, gen));
    register_parameter("weight_hh_l" + s, uniform({G, hidden_size}, -k, k, DType::f32, gen));
    register_parameter("bias_ih_l" + s, uniform({G}, -k, k, DType::f32, gen));
    if (two_biases) register_parameter("bias_hh_l" + s, uniform({G}, -k, k, DType::f32, gen));
  }
}

Tensor LSTM::forward(const Tensor& x) { return forward(x, LstmState{}).first; }

std::pair<Tensor, LstmState> LSTM::forward(const Tensor& x, const LstmState& state) {
  ANVIL_CHECK(state.empty() || (static_cast<std::int64_t>(state.h.size()) == layers_ &&
                                static_cast<std::int64_t>(state.c.size()) == layers_),
              "LSTM", "state has ", state.h.size(), " h and ", state.c.size(),
              " c tensors but the ", "stack has ", layers_, " layers");
  LstmState out;
  Tensor y = x;
  for (std::int64_t l = 0; l < layers_; ++l) {
    const std::string s = std::to_string(l);
    const Tensor none;
    auto r =
        lstm_layer(y, state.empty() ? none : state.h[l], state.empty() ? none : state.c[l],
                   parameter("weight_ih_l" + s), parameter("weight_hh_l" + s),
                   parameter("bias_ih_l" + s), two_biases_ ? parameter("bias_hh_l" + s) : none);
    y = r.y;
    out.h.push_back(r.h_n);
    out.c.push_back(r.c_n);
  }
  return {y, out};
}

std::string LSTM::extra_repr() const {
  return detail::str_cat("input=", in_, ", hidden=", hidden_, ", layers=", layers_,
                         ", biases=", two_biases_ ? 2 : 1);
}

Shape LSTM::output_shape(const Shape& in) const {
  ANVIL_CHECK(!in.empty() && in.back() == in_, "LSTM", "input shape ", shape_str(in),
              " does not end in ", in_);
  Shape out = in;
  out.back() = hidden_;
  return out;
}

double LSTM::forward_flops(const Shape& in) const {
  const std::int64_t rows_i = shape_numel(in) / in_;  // T * B (in is [T, B, in_])
  const double rows = static_cast<double>(rows_i);
  double f = 0;
  for (std::int64_t l = 0; l < layers_; ++l) {
    const double i = l == 0 ? in_ : hidden_;
    f += rows * (2.0 * 4 * hidden_ * (i + hidden_) + 10.0 * hidden_);
  }
  return f;
}

void LSTM::problems(const Shape& in, const std::string& prefix,
                    std::vector<NamedProblem>& out) const {
  ANVIL_CHECK(in.size() == 3, "LSTM::problems", "expected input [T, B, I], got ", shape_str(in));
  std::string base = prefix;
  if (!base.empty() && base.back() == '.') base.pop_back();
  for (std::int64_t l = 0; l < layers_; ++l) {
    LstmProblem p;
    p.T = in[0];
    p.B = in[1];
    p.I = l == 0 ? in_ : hidden_;
    p.H = hidden_;
    p.two_biases = two_biases_;
    p.has_initial_state = false;
    p.pass = LstmPass::forward_training;
    out.push_back({base + ".l" + std::to_string(l), p});
  }
}

}  // namespace anvil::nn
