// SPDX-License-Identifier: Apache-2.0
// The LSTM networks of networks.md: lstm32 / lstm64 (DLBench word-level LM, synthetic or PTB
// tokens), ptb_small (Zaremba et al. "small") and lstm_imdb (Keras IMDB sentiment LSTM).
// Language models take ids [B, T] and return logits [B*T, V] in targets.flatten() order
// (Note [Token models] in models/registry.h); lstm_imdb returns one logit per sequence [B, 1].
#include "engine/autograd/functions.h"
#include "engine/nn/init.h"
#include "engine/nn/layers.h"
#include "engine/nn/recurrent.h"
#include "models/lstm_language_model.h"
#include "models/zoo.h"

namespace anvil::models {
namespace {

// embedding V x E -> LSTM(E -> H, one layer) -> last step -> Linear H -> 1 (a logit; the loss
// is binary_cross_entropy_with_logits, sigmoid at inference).
class LstmClassifier final : public nn::Module {
 public:
  LstmClassifier(std::int64_t vocab, std::int64_t embed, std::int64_t hidden, Generator& gen) {
    embedding_ = register_module("embedding", std::make_shared<nn::Embedding>(vocab, embed, &gen));
    lstm_ = register_module("lstm", std::make_shared<nn::LSTM>(embed, hidden, 1, false, &gen));
    fc_ = register_module("fc", std::make_shared<nn::Linear>(hidden, 1, true, &gen));
  }
  Tensor forward(const Tensor& ids) override {
    ANVIL_CHECK(ids.dim() == 2, "LstmClassifier", "expected token ids [B, T], got ",
                shape_str(ids.sizes()));
    Tensor x = embedding_->forward(ids.transpose(0, 1));  // [T, B, E]
    auto [y, state] = lstm_->forward(x, nn::LstmState{});
    return fc_->forward(state.h.back());  // h of the last step: [B, H] -> [B, 1]
  }
  std::string type_name() const override { return "LstmClassifier"; }
  Shape output_shape(const Shape& in) const override { return {in[0], 1}; }
  double forward_flops(const Shape& in) const override {
    return lstm_->forward_flops({in[1], in[0], embedding_->embedding_dim()}) +
           fc_->forward_flops({in[0], lstm_->hidden_size()});
  }
  void problems(const Shape& in, const std::string& prefix,
                std::vector<nn::NamedProblem>& out) const override {
    lstm_->problems({in[1], in[0], embedding_->embedding_dim()}, prefix + "lstm.", out);
    fc_->problems({in[0], lstm_->hidden_size()}, prefix + "fc.", out);
  }

 private:
  std::shared_ptr<nn::Embedding> embedding_;
  std::shared_ptr<nn::LSTM> lstm_;
  std::shared_ptr<nn::Linear> fc_;
};

nn::ModulePtr dlbench_lm(Generator& g) {
  // One bias vector per layer (networks.md: 6,180,624 parameters), PyTorch default inits.
  return std::make_shared<LstmLanguageModel>(10000, 256, 256, 2, false, &g);
}

}  // namespace

std::vector<ModelInfo> builtin_lstm_models() {
  std::vector<ModelInfo> v;
  for (std::int64_t T : {32, 64})
    v.push_back({"lstm" + std::to_string(T),
                 "DLBench LSTM-" + std::to_string(T) +
                     ": embedding 10000x256, 2x LSTM 256 (one bias), fc 256->10000 every step",
                 {T},
                 InputKind::tokens,
                 10000,
                 128,
                 {128, 256, 512},
                 "sgd lr=1.0 clip=5",
                 [](const ModelOptions&, Generator& g) { return dlbench_lm(g); }});
  v.push_back({"ptb_small",
               "Zaremba small PTB LM: embedding 10000x200, 2x LSTM 200 (one bias), fc 200->10000; "
               "lr halved each epoch after epoch 4",
               {20},
               InputKind::tokens,
               10000,
               20,
               {20},
               "sgd lr=1.0 clip=5",
               [](const ModelOptions&, Generator& g) -> nn::ModulePtr {
                 // One bias per layer gives exactly 4,651,600 parameters (two: 4,653,200).
                 auto net = std::make_shared<LstmLanguageModel>(10000, 200, 200, 2, false, &g);
                 for (auto& p : net->parameters()) nn::init::uniform_(p, -0.1, 0.1, &g);
                 return net;
               }});
  v.push_back(
      {"lstm_imdb",
       "Keras IMDB LSTM: embedding 5000x32, LSTM 100 (one bias), fc 100->1 on the last step, "
       "sigmoid / binary CE",
       {500},
       InputKind::tokens,
       1,
       500,
       {500},
       "adam lr=1e-2",
       [](const ModelOptions&, Generator& g) -> nn::ModulePtr {
         return std::make_shared<LstmClassifier>(5000, 32, 100, g);
       }});
  for (auto& m : v) {  // Note [Token models] (models/registry.h)
    const bool classifier = m.name == "lstm_imdb";
    m.loss = classifier ? LossKind::binary_cross_entropy : LossKind::sequence_cross_entropy;
    m.vocab_size = classifier ? 5000 : 10000;
    // Embedding, LSTM (cuda.custom.fused / unfused), the fused decoder + cross-entropy and BCE
    // all have CUDA variants (issue 21).
    m.gpu_path = true;
  }
  return v;
}

}  // namespace anvil::models
