// SPDX-License-Identifier: Apache-2.0
// SGD folded into backward (Note [Folded SGD]): the same parameters as the ordinary
// gradient-then-step path, for a plain stack, a weight used twice and retain_graph; and the
// refusal for momentum.
#include <catch2/catch.hpp>

#include "engine/autograd/functions.h"
#include "engine/nn/layers.h"
#include "engine/optim/optimizer.h"
#include "helpers/gradcheck.h"

using namespace anvil;
using anvil::test::max_abs_diff;

namespace {

// A small net whose first Linear runs twice when `tied` (the same weight at two depths).
struct Net {
  std::shared_ptr<nn::Linear> a, b;
  bool tied;
  Net(std::uint64_t seed, bool tie) : tied(tie) {
    Generator g(seed);
    a = std::make_shared<nn::Linear>(6, 6, true, &g);
    b = std::make_shared<nn::Linear>(6, 3, true, &g);
  }
  Tensor forward(const Tensor& x) {
    Tensor h = sigmoid(a->forward(x));
    if (tied) h = tanh(a->forward(h));
    return b->forward(h);
  }
  std::vector<Tensor> params() { return {a->weight(), a->bias(), b->weight(), b->bias()}; }
};

// Runs `steps` SGD steps on two copies of the net, one folded, one not; returns the largest
// parameter difference and whether the folded copy's final-layer weight got no gradient.
std::pair<double, bool> compare(bool tied, int steps) {
  Generator data(7);
  const Tensor x = normal({5, 6}, 0, 1, DType::f32, &data);
  const Tensor y = randint({5}, 0, 3, DType::i64, &data);
  Net plain(3, tied), folded(3, tied);
  optim::SGD opt_plain(plain.params(), 0.5), opt_folded(folded.params(), 0.5);
  opt_folded.fold_into_backward();
  bool folded_skipped_grad = true;
  for (int s = 0; s < steps; ++s) {
    opt_plain.zero_grad();
    opt_folded.zero_grad();
    cross_entropy(plain.forward(x), y).backward();
    cross_entropy(folded.forward(x), y).backward();
    folded_skipped_grad = folded_skipped_grad && !folded.b->weight().grad().defined();
    opt_plain.step();
    opt_folded.step();
  }
  double diff = 0;
  const auto pp = plain.params(), pf = folded.params();
  for (std::size_t i = 0; i < pp.size(); ++i) diff = std::max(diff, max_abs_diff(pp[i], pf[i]));
  return {diff, folded_skipped_grad};
}

}  // namespace

TEST_CASE("folded SGD gives the parameters of gradient then step", "[optim][folded_sgd]") {
  const auto [diff, skipped] = compare(/*tied=*/false, 4);
  CHECK(skipped);  // the update really ran inside backward
  CHECK(diff < 1e-6);
}

TEST_CASE("folded SGD with a weight used twice folds only its last use", "[optim][folded_sgd]") {
  const auto [diff, skipped] = compare(/*tied=*/true, 4);
  CHECK(skipped);
  CHECK(diff < 1e-6);
}

TEST_CASE("folded SGD leaves ordinary gradients under retain_graph", "[optim][folded_sgd]") {
  Net net(3, false);
  optim::SGD opt(net.params(), 0.5);
  opt.fold_into_backward();
  Generator data(7);
  const Tensor x = normal({5, 6}, 0, 1, DType::f32, &data);
  const Tensor y = randint({5}, 0, 3, DType::i64, &data);
  const Tensor w_before = net.b->weight().clone();
  cross_entropy(net.forward(x), y).backward(Tensor(), /*retain_graph=*/true);
  CHECK(net.b->weight().grad().defined());
  CHECK(max_abs_diff(net.b->weight(), w_before) == 0.0);
}

TEST_CASE("folded SGD refuses momentum", "[optim][folded_sgd]") {
  Net net(3, false);
  optim::SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  optim::SGD opt(net.params(), o);
  CHECK_THROWS_WITH(opt.fold_into_backward(), Catch::Contains("only plain SGD can be folded"));
  CHECK_NOTHROW(opt.fold_into_backward(false));
}
