// SPDX-License-Identifier: Apache-2.0
// AdamW (engine/optim/optimizer.h): its defaults, five steps against a hand-written reference of
// torch.optim.AdamW's documented update (f32 and f64, both CPU variants), the decay acting on
// the weight and not through the moments, and Adam's update left as it was.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "anvil/anvil.h"

using namespace anvil;

namespace {

// torch.optim.AdamW's algorithm as its documentation writes it, one element at a time in T:
//   p <- p - lr * wd * p
//   m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
//   p <- p - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
template <typename T>
struct AdamWReference {
  double lr, b1, b2, eps, wd;
  std::vector<T> p, m, v;
  int t = 0;
  void step(const std::vector<T>& g) {
    ++t;
    const double c1 = 1 - std::pow(b1, t), c2 = 1 - std::pow(b2, t);
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] = p[i] * static_cast<T>(1 - lr * wd);
      m[i] = static_cast<T>(b1) * m[i] + static_cast<T>(1 - b1) * g[i];
      v[i] = static_cast<T>(b2) * v[i] + static_cast<T>(1 - b2) * g[i] * g[i];
      const T denom = std::sqrt(v[i]) / static_cast<T>(std::sqrt(c2)) + static_cast<T>(eps);
      p[i] = p[i] - static_cast<T>(lr / c1) * m[i] / denom;
    }
  }
};

template <typename T>
std::vector<T> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<T>(c.data<T>(), c.data<T>() + c.numel());
}

template <typename T>
Tensor tensor_of(const std::vector<T>& v) {
  return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())});
}

// Five steps of AdamW on two parameters with the gradients of a fixed sequence, against the
// reference; returns the largest difference over the steps relative to |p| + lr (a parameter
// near 0 is compared at the scale of its steps); the kernels round 1 - beta from double as
// PyTorch does (in f32, 1 - 0.999f would be 1.3e-5 off).
template <typename T>
double max_relative_error(const optim::AdamWOptions& o) {
  const std::vector<T> p0 = {T(0.5), T(-1.25), T(2.0), T(0.0), T(3.5)};
  const std::vector<T> q0 = {T(-0.75), T(0.125), T(1e-3)};
  Tensor p = tensor_of(p0), q = tensor_of(q0);
  optim::AdamW opt({p, q}, o);
  AdamWReference<T> rp{o.lr,
                       o.beta1,
                       o.beta2,
                       o.eps,
                       o.weight_decay,
                       p0,
                       std::vector<T>(p0.size()),
                       std::vector<T>(p0.size())};
  AdamWReference<T> rq{o.lr,
                       o.beta1,
                       o.beta2,
                       o.eps,
                       o.weight_decay,
                       q0,
                       std::vector<T>(q0.size()),
                       std::vector<T>(q0.size())};
  double worst = 0;
  for (int step = 1; step <= 5; ++step) {
    std::vector<T> gp, gq;
    for (std::size_t i = 0; i < p0.size(); ++i)
      gp.push_back(static_cast<T>(std::sin(1.7 * step + static_cast<double>(i))));
    for (std::size_t i = 0; i < q0.size(); ++i)
      gq.push_back(static_cast<T>(0.01 * std::cos(0.3 * step * static_cast<double>(i + 1))));
    p.mutable_grad() = tensor_of(gp);
    q.mutable_grad() = tensor_of(gq);
    opt.step();
    rp.step(gp);
    rq.step(gq);
    for (const auto& [got, want] : {std::pair{values<T>(p), rp.p}, std::pair{values<T>(q), rq.p}})
      for (std::size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, std::abs(static_cast<double>(got[i] - want[i])) /
                                    (std::abs(static_cast<double>(want[i])) + o.lr));
  }
  CHECK(opt.steps() == 5);
  return worst;
}

}  // namespace

TEST_CASE("AdamW's defaults are torch.optim.AdamW's", "[optim][adamw]") {
  const optim::AdamWOptions o;
  CHECK(o.lr == 1e-3);
  CHECK(o.beta1 == 0.9);
  CHECK(o.beta2 == 0.999);
  CHECK(o.eps == 1e-8);
  CHECK(o.weight_decay == 1e-2);
  optim::AdamW opt({Tensor::zeros({2})}, {});
  CHECK(opt.type_name() == "AdamW");
  CHECK(opt.options().weight_decay == 1e-2);
}

TEST_CASE("AdamW matches the reference of PyTorch's update over five steps", "[optim][adamw]") {
  const std::string variant = GENERATE("cpu.omp", "ref");
  ForceVariant force("adam_update", variant);
  INFO("variant " << variant);
  for (const optim::AdamWOptions& o :
       {optim::AdamWOptions{}, optim::AdamWOptions{.lr = 0.05, .weight_decay = 0.3},
        optim::AdamWOptions{
            .lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.0}}) {
    INFO("lr " << o.lr << " wd " << o.weight_decay);
    CHECK(max_relative_error<double>(o) < 1e-13);
    CHECK(max_relative_error<float>(o) < 1e-6);
  }
}

TEST_CASE("AdamW decays the weight itself, Adam through the gradient", "[optim][adamw]") {
  // A zero gradient: AdamW's moments stay 0, so the step is the decay alone, p (1 - lr wd)^t;
  // Adam's L2 term makes a gradient wd * p and takes a normalised step of about lr.
  const double lr = 0.1, wd = 0.5;
  Tensor a = Tensor::from_vector(std::vector<double>{2.0, -4.0}, {2});
  Tensor b = a.clone();
  optim::AdamW adamw({a}, {.lr = lr, .weight_decay = wd});
  optim::Adam adam({b}, {.lr = lr, .weight_decay = wd});
  for (int t = 1; t <= 3; ++t) {
    a.mutable_grad() = Tensor::zeros({2}, DType::f64);
    b.mutable_grad() = Tensor::zeros({2}, DType::f64);
    adamw.step();
    adam.step();
    const double keep = std::pow(1 - lr * wd, t);
    CHECK(a.data<double>()[0] == Approx(2.0 * keep).epsilon(1e-15));
    CHECK(a.data<double>()[1] == Approx(-4.0 * keep).epsilon(1e-15));
  }
  // Adam: three steps of about lr each towards 0 (|m / sqrt(v)| is 1 for a constant-sign term).
  CHECK(b.data<double>()[0] == Approx(2.0 - 3 * lr).epsilon(1e-3));
  CHECK(b.data<double>()[1] == Approx(-4.0 + 3 * lr).epsilon(1e-3));
}

TEST_CASE("AdamW without weight decay is Adam bit for bit", "[optim][adamw]") {
  Generator gen(11);
  Tensor a = normal({257}, 0, 1, DType::f32, &gen);
  Tensor b = a.clone();
  optim::AdamW adamw({a}, {.lr = 0.01, .weight_decay = 0.0});
  optim::Adam adam({b}, {.lr = 0.01});
  for (int t = 0; t < 4; ++t) {
    Tensor g = normal({257}, 0, 1, DType::f32, &gen);
    a.mutable_grad() = g.clone();
    b.mutable_grad() = g.clone();
    adamw.step();
    adam.step();
  }
  CHECK(values<float>(a) == values<float>(b));
}

TEST_CASE("AdamW refuses bad options naming them", "[optim][adamw]") {
  CHECK_THROWS_WITH(optim::AdamW({Tensor::zeros({2})}, {.weight_decay = -0.1}),
                    Catch::Contains("weight_decay must be finite and >= 0, got -0.1"));
  CHECK_THROWS_WITH(optim::AdamW({Tensor::zeros({2})}, {.beta2 = 1.0}),
                    Catch::Contains("betas=(0.9, 1)"));
}
