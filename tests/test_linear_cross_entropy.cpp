// SPDX-License-Identifier: Apache-2.0
// linear_cross_entropy (Note [Linear cross-entropy]): the value and every gradient of
// cross_entropy(linear(x, W, b), target), f32 and f64, with and without a bias, for any subset
// of inputs requiring grad, under a scaled loss, retained graphs and folded SGD; the float64
// gradient check; the language models' fused sequence loss against the composed one.
#include <catch2/catch.hpp>

#include "engine/autograd/functions.h"
#include "engine/core/views.h"
#include "models/lstm_language_model.h"
#include "engine/optim/optimizer.h"
#include "helpers/gradcheck.h"
#include "models/registry.h"
#include "models/training_step.h"

using namespace anvil;
using anvil::test::gradcheck;
using anvil::test::max_abs_diff;
using anvil::test::uniform_leaf;
using Catch::Matchers::Contains;

namespace {

struct Inputs {
  Tensor x, w, b, t;
};

Inputs make_inputs(std::int64_t n, std::int64_t in, std::int64_t c, DType dt, bool bias,
                   std::uint64_t seed) {
  Inputs r;
  r.x = uniform_leaf({n, in}, -1, 1, seed).to(dt).detach();
  r.w = uniform_leaf({c, in}, -1, 1, seed + 1).to(dt).detach();
  if (bias) r.b = uniform_leaf({c}, -1, 1, seed + 2).to(dt).detach();
  Generator g(seed + 3);
  r.t = randint({n}, 0, c, DType::i64, &g);
  return r;
}

// Loss and gradients (x, w, b) of either form; `scale` multiplies the loss before backward.
std::vector<Tensor> run(const Inputs& in, bool fused, double scale, bool gx, bool gw, bool gb) {
  Tensor x = in.x.clone(), w = in.w.clone(), b = in.b.defined() ? in.b.clone() : Tensor();
  x.set_requires_grad(gx);
  w.set_requires_grad(gw);
  if (b.defined()) b.set_requires_grad(gb);
  Tensor loss = fused ? linear_cross_entropy(x, w, b, in.t) : cross_entropy(linear(x, w, b), in.t);
  (loss * scale).backward();
  return {loss, x.grad(), w.grad(), b.defined() ? b.grad() : Tensor()};
}

}  // namespace

TEST_CASE("linear_cross_entropy has the value and gradients of linear then cross_entropy",
          "[linear_cross_entropy]") {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 2e-6 : 1e-12;
    // (rows, in, classes): small; a row count above the kernels' thread grain; wide classes
    // with a narrow input (the decoder shape, where linear folds its bias into the GEMM); an
    // input of 128 features, narrower than the classes, whose weight gradient is computed
    // transposed (Note [Decoder weight gradient, transposed]).
    for (auto [n, in, c] : {std::tuple{1, 1, 1}, std::tuple{7, 5, 3}, std::tuple{300, 16, 130},
                            std::tuple{64, 8, 1500}, std::tuple{40, 128, 300}}) {
      for (bool bias : {true, false}) {
        const Inputs ins = make_inputs(n, in, c, dt, bias, 40 + n);
        for (auto [gx, gw, gb] : {std::tuple{true, true, true}, std::tuple{false, true, false},
                                  std::tuple{true, false, false}, std::tuple{false, false, true}}) {
          if (!bias && !gx && !gw) continue;  // nothing would require grad
          INFO(dtype_name(dt) << " n=" << n << " in=" << in << " c=" << c << " bias=" << bias
                              << " grads x/w/b=" << gx << gw << gb);
          const auto want = run(ins, false, 2.5, gx, gw, gb);
          const auto got = run(ins, true, 2.5, gx, gw, gb);
          CHECK(max_abs_diff(got[0], want[0]) <= tol * 10);
          for (int i = 1; i < 4; ++i) {
            REQUIRE(got[i].defined() == want[i].defined());
            if (want[i].defined()) CHECK(max_abs_diff(got[i], want[i]) <= tol);
          }
        }
      }
    }
  }
}

TEST_CASE("linear_cross_entropy passes the float64 gradient check",
          "[linear_cross_entropy][gradcheck]") {
  Inputs ins = make_inputs(6, 4, 5, DType::f64, true, 90);
  for (Tensor* t : {&ins.x, &ins.w, &ins.b}) t->set_requires_grad(true);
  const Tensor target = ins.t;
  const auto r = gradcheck("linear_cross_entropy",
                           [target](const std::vector<Tensor>& v) {
                             return linear_cross_entropy(v[0], v[1], v[2], target);
                           },
                           {ins.x, ins.w, ins.b});
  INFO(r.message);
  CHECK(r.ok);
}

TEST_CASE("linear_cross_entropy without gradients, retained graphs and folded SGD",
          "[linear_cross_entropy]") {
  const Inputs ins = make_inputs(33, 6, 40, DType::f32, true, 120);
  const Tensor want = cross_entropy(linear(ins.x, ins.w, ins.b), ins.t);
  // No input requires grad: the composed path, same value.
  CHECK(max_abs_diff(linear_cross_entropy(ins.x, ins.w, ins.b, ins.t), want) <= 1e-6);

  // Two backward passes over a retained graph accumulate twice the gradient (the saved
  // gradient buffer is read, never changed, by the backward).
  Tensor w = ins.w.clone();
  w.set_requires_grad(true);
  Tensor loss = linear_cross_entropy(ins.x, w, ins.b, ins.t);
  loss.backward(Tensor(), true);
  const Tensor once = w.grad().clone();
  loss.backward();
  CHECK(max_abs_diff(w.grad(), once * 2.0) <= 1e-6);

  // Folded SGD (Note [Folded SGD]) updates W and b inside the backward as the plain step does.
  Tensor wp = ins.w.clone(), bp = ins.b.clone(), wf = ins.w.clone(), bf = ins.b.clone();
  for (Tensor* t : {&wp, &bp, &wf, &bf}) t->set_requires_grad(true);
  optim::SGD plain({wp, bp}, 0.3), folded({wf, bf}, 0.3);
  folded.fold_into_backward();
  for (int s = 0; s < 3; ++s) {
    plain.zero_grad();
    folded.zero_grad();
    linear_cross_entropy(ins.x, wp, bp, ins.t).backward();
    linear_cross_entropy(ins.x, wf, bf, ins.t).backward();
    CHECK(!wf.grad().defined());
    CHECK(!bf.grad().defined());
    plain.step();
    folded.step();
  }
  CHECK(max_abs_diff(wp, wf) <= 1e-6);
  CHECK(max_abs_diff(bp, bf) <= 1e-6);
  CHECK(max_abs_diff(wp, ins.w) > 1e-3);  // the steps did move the weights
}

TEST_CASE("linear_cross_entropy rejects bad input with its name", "[linear_cross_entropy]") {
  const Inputs ins = make_inputs(4, 3, 5, DType::f32, true, 150);
  Tensor w = ins.w.clone();
  w.set_requires_grad(true);
  CHECK_THROWS_WITH(linear_cross_entropy(ins.x.reshape({12}), w, ins.b, ins.t),
                    Contains("linear_cross_entropy") && Contains("[12]"));
  CHECK_THROWS_WITH(
      linear_cross_entropy(ins.x, w, ins.b,
                           Tensor::from_vector(std::vector<std::int64_t>{0, 1, 5, 2}, {4})),
      Contains("target 5 at row 2 is out of range for 5 classes"));
  CHECK_THROWS_WITH(linear_cross_entropy(ins.x, w.reshape({3, 5}).detach(), ins.b, ins.t),
                    Contains("linear"));
}

TEST_CASE("a language model's fused sequence loss equals the composed loss",
          "[linear_cross_entropy][lstm]") {
  const auto& info = models::info("ptb_small");
  // Two identical small LMs (same seed), one trained through each loss for two steps.
  auto make = [] {
    Generator g(5);
    auto lm = std::make_shared<models::LstmLanguageModel>(50, 8, 12, 2, false, &g);
    lm->set_carry_state(false);
    return lm;
  };
  auto a = make(), b = make();
  Generator data(6);
  const Tensor ids = randint({3, 4}, 0, 50, DType::i64, &data);
  const Tensor targets = randint({3, 4}, 0, 50, DType::i64, &data);
  optim::SGD oa(a->parameters(), 1.0), ob(b->parameters(), 1.0);
  for (int s = 0; s < 2; ++s) {
    oa.zero_grad();
    ob.zero_grad();
    Tensor la = models::model_loss(info, a->forward(ids), targets);
    Tensor lb = models::model_forward_loss(info, *b, ids, targets);
    CHECK(std::abs(la.item() - lb.item()) <= 1e-5 * std::abs(la.item()));
    la.backward();
    lb.backward();
    const auto pa = a->parameters(), pb = b->parameters();
    for (std::size_t i = 0; i < pa.size(); ++i) {
      INFO("parameter " << i << " step " << s);
      CHECK(max_abs_diff(pa[i].grad(), pb[i].grad()) <= 1e-5);
    }
    oa.step();
    ob.step();
  }
  CHECK_THROWS_WITH(b->sequence_loss(ids, targets.reshape({12})),
                    Contains("sequence_loss") && Contains("[12]"));
}

TEST_CASE("a wide linear over many rows gets the weight gradient dy^T x",
          "[linear_cross_entropy][linear]") {
  // The decoder-like shape (narrow input, wide output, many rows), checked against the product
  // dy^T x itself rather than against another path through linear's backward.
  for (DType dt : {DType::f32, DType::f64}) {
    const Inputs ins = make_inputs(1024, 128, 512, dt, true, 170);
    Tensor w = ins.w.clone();
    w.set_requires_grad(true);
    Generator g(171);
    const Tensor dy = uniform({1024, 512}, -1, 1, dt, &g);
    linear(ins.x, w, ins.b).backward(dy);
    const Tensor want = matmul(raw::transpose(dy, 0, 1), ins.x);
    INFO(dtype_name(dt));
    CHECK(max_abs_diff(w.grad(), want) <= (dt == DType::f32 ? 1e-3 : 1e-10));
    // The fused loss's weight gradient: s D^T x with D = softmax - onehot, against the
    // composed ops' dlogits (whose own weight gradient takes the same path, so compare with
    // the product of the composed dlogits instead).
    Tensor w2 = ins.w.clone();
    w2.set_requires_grad(true);
    linear_cross_entropy(ins.x, w2, ins.b, ins.t).backward();
    Tensor logits = linear(ins.x, ins.w, ins.b);
    logits.set_requires_grad(true);
    cross_entropy(logits, ins.t).backward();
    const Tensor want2 = matmul(raw::transpose(logits.grad(), 0, 1), ins.x);
    CHECK(max_abs_diff(w2.grad(), want2) <= (dt == DType::f32 ? 1e-6 : 1e-14));
  }
}
