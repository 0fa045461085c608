// SPDX-License-Identifier: Apache-2.0
// Modules with several inputs (engine/nn/multi_input.h, Note [Multi-input modules]): a typed
// two-input forward whose gradients reach both inputs (f64 gradient check), the erased call
// through Module&, a two-input first layer in a Sequential, a two-input model trained and
// checkpointed like any other, and the refusals, one line each.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "helpers/bytes.h"
#include "helpers/datasets.h"
#include "helpers/gradcheck.h"

using namespace anvil;

namespace {

// score(q, k) = (q Wq^T + bq) * (k Wk^T), elementwise: [B, H] from q [B, Dq] and k [B, Dk].
class Scorer final : public nn::MultiInputModule<2> {
 public:
  Scorer(std::int64_t dq, std::int64_t dk, std::int64_t h, std::uint64_t seed) {
    register_parameter("wq", test::uniform_leaf({h, dq}, -1, 1, seed));
    register_parameter("bq", test::uniform_leaf({h}, -1, 1, seed + 1));
    register_parameter("wk", test::uniform_leaf({h, dk}, -1, 1, seed + 2));
  }
  Tensor forward(const Tensor& query, const Tensor& key) override {
    return mul(linear(query, parameter("wq"), parameter("bq")), linear(key, parameter("wk")));
  }
  std::string type_name() const override { return "Scorer"; }
};

// A model whose forward takes two inputs and holds a two-input child and one-input layers.
class PairClassifier final : public nn::MultiInputModule<2> {
 public:
  explicit PairClassifier(std::uint64_t seed) {
    Generator g(seed);
    scorer_ = register_module("scorer", std::make_shared<Scorer>(5, 3, 8, seed));
    head_ = register_module("head", std::make_shared<nn::Sequential>(
                                        nn::Tanh(), std::make_shared<nn::Dropout>(0.2, &g)));
    out_ = register_module("out", std::make_shared<nn::Linear>(8, 2, true, &g));
  }
  Tensor forward(const Tensor& a, const Tensor& b) override {
    return out_->forward(head_->forward(scorer_->forward(a, b)).to(DType::f32));
  }
  std::string type_name() const override { return "PairClassifier"; }

 private:
  std::shared_ptr<Scorer> scorer_;
  std::shared_ptr<nn::Sequential> head_;
  std::shared_ptr<nn::Linear> out_;
};

// On the module's own type, a one-tensor forward does not compile; two tensors do.
template <typename M>
concept TakesOne = requires(M& m, const Tensor& x) {
  m.forward(x);
};
template <typename M>
concept TakesTwo = requires(M& m, const Tensor& x) {
  m.forward(x, x);
};
static_assert(!TakesOne<Scorer> && TakesTwo<Scorer>);
static_assert(TakesOne<nn::Linear> && !TakesTwo<nn::Linear>);
static_assert(TakesOne<nn::Module>);  // the erased one-tensor call, refused at run time

std::vector<std::string> bytes_of(const nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& [name, t] : m.named_parameters()) out.push_back(name + test::tensor_bytes(t));
  return out;
}

}  // namespace

TEST_CASE("a two-input module's gradients reach both inputs", "[nn][multi_input]") {
  auto scorer = std::make_shared<Scorer>(4, 3, 5, 11);
  const Tensor q = test::uniform_leaf({6, 4}, -1, 1, 21), k = test::uniform_leaf({6, 3}, -1, 1, 22);
  ANVIL_CHECK_GRADCHECK(
      "Scorer", [&](const std::vector<Tensor>& in) { return scorer->forward(in[0], in[1]); },
      {q, k});

  // One backward fills both inputs' gradients and every parameter's, through each way to call.
  for (int way = 0; way < 3; ++way) {
    INFO("way " << way);
    const Tensor a = test::uniform_leaf({6, 4}, -1, 1, 31),
                 b = test::uniform_leaf({6, 3}, -1, 1, 32);
    scorer->zero_grad();
    nn::Module& erased = *scorer;
    const Tensor y = way == 0   ? scorer->forward(a, b)
                     : way == 1 ? (*scorer)(a, b)
                                : erased.forward_inputs({a, b});
    CHECK(y.sizes() == Shape{6, 5});
    sum(y).backward();
    REQUIRE(a.grad().defined());
    REQUIRE(b.grad().defined());
    CHECK(a.grad().sizes() == a.sizes());
    CHECK(b.grad().sizes() == b.sizes());
    for (const auto& [name, p] : scorer->named_parameters()) CHECK(p.grad().defined());
    // d sum(y) / d a = (b Wk^T) Wq: the key's projection reaches the query's gradient.
    NoGradGuard no_grad;
    const auto& params = scorer->named_parameters();
    const Tensor want_a = matmul(linear(b, params[2].second), params[0].second);
    CHECK(test::max_abs_diff(a.grad(), want_a) < 1e-12);
  }
  CHECK(scorer->num_inputs() == 2);
}

TEST_CASE("a Sequential passes its inputs to a two-input first layer", "[nn][multi_input]") {
  auto scorer = std::make_shared<Scorer>(4, 3, 5, 7);
  auto seq = std::make_shared<nn::Sequential>(scorer, nn::ReLU());
  CHECK(seq->num_inputs() == 2);
  const Tensor a = test::uniform_leaf({2, 4}, -1, 1, 1), b = test::uniform_leaf({2, 3}, -1, 1, 2);
  const Tensor want = relu(scorer->forward(a, b));
  CHECK(test::max_abs_diff(seq->forward(a, b), want) == 0);
  CHECK(test::max_abs_diff(seq->forward_inputs({a, b}), want) == 0);
  sum(seq->forward(a, b)).backward();
  CHECK(a.grad().defined());
  CHECK(b.grad().defined());
  // An ordinary Sequential still takes one input, however it is called.
  nn::Sequential one(std::make_shared<nn::Linear>(4, 2), nn::ReLU());
  CHECK(one.num_inputs() == 1);
  const Tensor x = Tensor::ones({3, 4}, DType::f32);
  CHECK(test::max_abs_diff(one.forward_inputs({x}), one.forward(x)) == 0);
}

TEST_CASE("misused multi-input modules fail with one line naming the module and the counts",
          "[nn][multi_input]") {
  auto scorer = std::make_shared<Scorer>(4, 3, 5, 7);
  const Tensor a = test::uniform_leaf({2, 4}, -1, 1, 1), b = test::uniform_leaf({2, 3}, -1, 1, 2);
  nn::Module& erased = *scorer;
  CHECK_THROWS_WITH(erased.forward(a),
                    "Scorer::forward: takes 2 inputs, got 1 (call forward "
                    "with 2 tensors, or forward_inputs)");
  CHECK_THROWS_WITH(erased(a), Catch::StartsWith("Scorer::forward: takes 2 inputs, got 1"));
  CHECK_THROWS_WITH(erased.forward_inputs({a}), "Scorer::forward_inputs: takes 2 inputs, got 1");
  CHECK_THROWS_WITH(erased.forward_inputs({a, b, a}),
                    "Scorer::forward_inputs: takes 2 inputs, got 3");
  nn::Linear linear_layer(4, 2);
  CHECK_THROWS_WITH(linear_layer.forward_inputs({a, b}),
                    "Linear::forward_inputs: takes 1 input, got 2");
  // A Sequential's later layers get one tensor: a two-input one there is refused when added.
  nn::Sequential seq(nn::ReLU());
  CHECK_THROWS_WITH(seq.add(scorer),
                    "Sequential::add: layer 1 (Scorer) takes 2 inputs; only the first layer of a "
                    "Sequential may take several");
  CHECK(seq.size() == 1);
  // With a two-input first layer, one input is refused by that layer.
  nn::Sequential pair(scorer, nn::ReLU());
  CHECK_THROWS_WITH(pair.forward(a), Catch::StartsWith("Scorer::forward: takes 2 inputs, got 1"));
  CHECK_THROWS_WITH(pair.forward_inputs({}),
                    Catch::StartsWith("Scorer::forward_inputs: takes 2 inputs, got 0"));
  nn::Sequential empty;
  CHECK_THROWS_WITH(empty.forward_inputs({a, b}),
                    "Sequential::forward_inputs: takes 1 input, got 2");
}

TEST_CASE("a two-input model trains, switches mode and resumes from a checkpoint",
          "[nn][multi_input][checkpoint]") {
  Generator data(3);
  const Tensor a = normal({16, 5}, 0, 1, DType::f64, &data);
  const Tensor b = normal({16, 3}, 0, 1, DType::f64, &data);
  const Tensor y = randint({16}, 0, 2, DType::i64, &data);
  auto train = [&](PairClassifier& net, optim::Adam& opt, int steps) {
    double last = 0;
    for (int s = 0; s < steps; ++s) {
      opt.zero_grad();
      Tensor loss = cross_entropy(net.forward(a, b), y);
      loss.backward();
      opt.step();
      last = loss.item();
    }
    return last;
  };
  PairClassifier net(1);
  CHECK(net.named_parameters().size() == 5);  // scorer.wq, scorer.bq, scorer.wk, out.*
  CHECK(net.named_parameters()[0].first == "scorer.wq");
  net.eval();
  CHECK_FALSE(net.children()[1].second->children()[1].second->is_training());  // the dropout
  net.train();
  optim::Adam opt(net.parameters(), {.lr = 0.05});
  const double first = cross_entropy(net.forward(a, b), y).item();
  train(net, opt, 3);
  test::ScratchDir dir("multi_input");
  const std::string path = dir.file("pair.safetensors");
  optim::save_checkpoint(path, net, &opt);
  const double later = train(net, opt, 20);
  CHECK(later < first);

  PairClassifier resumed(2);  // other weights and dropout seed: all come from the file
  optim::Adam opt2(resumed.parameters(), {.lr = 0.05});
  optim::load_checkpoint(path, resumed, &opt2);
  train(resumed, opt2, 20);
  CHECK(bytes_of(resumed) == bytes_of(net));
}
