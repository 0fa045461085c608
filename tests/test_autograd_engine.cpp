// SPDX-License-Identifier: Apache-2.0
// The reverse-mode engine (engine/autograd/): accumulation, shared leaves, grad mode,
// retain_graph, deep graphs (Note [Backward engine], Note [Autograd graph]) and its errors.
#include <catch2/catch.hpp>

#include <pthread.h>

#include <chrono>
#include <exception>
#include <functional>
#include <thread>

#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/views.h"
#include "helpers/gradcheck.h"

using namespace anvil;
using anvil::test::max_abs_diff;
using anvil::test::values_f64;

namespace {
Tensor leaf(const std::vector<double>& v, const Shape& shape) {
  Tensor t = Tensor::from_vector(v, shape);
  t.set_requires_grad(true);
  return t;
}
bool all_equal(const Tensor& t, double value) {
  for (double x : values_f64(t))
    if (x != value) return false;
  return true;
}
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
// Runs fn on a thread whose stack is `bytes` large; rethrows what fn threw.
void run_on_small_stack(const std::function<void()>& fn, std::size_t bytes = std::size_t{1} << 20) {
  struct Ctx {
    const std::function<void()>* fn;
    std::exception_ptr error;
  } ctx{&fn, nullptr};
  pthread_attr_t attr;
  REQUIRE(pthread_attr_init(&attr) == 0);
  REQUIRE(pthread_attr_setstacksize(&attr, bytes) == 0);
  pthread_t thread;
  const int rc = pthread_create(
      &thread, &attr,
      [](void* p) -> void* {
        auto* c = static_cast<Ctx*>(p);
        try {
          (*c->fn)();
        } catch (...) {
          c->error = std::current_exception();
        }
        return nullptr;
      },
      &ctx);
  pthread_attr_destroy(&attr);
  REQUIRE(rc == 0);
  pthread_join(thread, nullptr);
  if (ctx.error) std::rethrow_exception(ctx.error);
}
}  // namespace

TEST_CASE("gradients accumulate across backward calls", "[autograd]") {
  Tensor x = leaf({1, 2, 3}, {3});
  sum(x * 3.0).backward();
  REQUIRE(x.grad().defined());
  CHECK(all_equal(x.grad(), 3.0));
  sum(x * 2.0).backward();
  CHECK(all_equal(x.grad(), 5.0));
  // Resetting the gradient starts over.
  x.mutable_grad() = Tensor();
  sum(x * x).backward();
  CHECK(values_f64(x.grad()) == std::vector<double>{2, 4, 6});
  // Accumulation through a broadcast path and a second backward with an explicit seed.
  Tensor b = leaf({1}, {1});
  Tensor y = x * b;  // [3]
  y.backward(Tensor::from_vector(std::vector<double>{1, 1, 1}, {3}));
  CHECK(b.grad().item() == 6.0);
  (x * b).backward(Tensor::from_vector(std::vector<double>{1, 0, 0}, {3}));
  CHECK(b.grad().item() == 7.0);
}

TEST_CASE("the same leaf used twice in one graph", "[autograd]") {
  Tensor x = leaf({1, 2, 3}, {3});
  sum(x * x).backward();
  CHECK(values_f64(x.grad()) == std::vector<double>{2, 4, 6});
  x.mutable_grad() = Tensor();
  sum(x + x).backward();
  CHECK(all_equal(x.grad(), 2.0));
  x.mutable_grad() = Tensor();
  // Through several paths of different lengths: d/dx (x + 2x + x*x) = 3 + 2x.
  Tensor y = x + x * 2.0 + x * x;
  sum(y).backward();
  CHECK(values_f64(x.grad()) == std::vector<double>{5, 7, 9});
}

TEST_CASE("leaves never alias each other's (or the seed's) gradient buffers", "[autograd]") {
  // a + b passes the same incoming gradient tensor to both inputs unchanged.
  SECTION("add pass-through from a scalar loss") {
    Tensor a = leaf({1, 2, 3}, {3}), b = leaf({4, 5, 6}, {3});
    sum(a + b).backward();
    REQUIRE(a.grad().defined());
    REQUIRE(b.grad().defined());
    CHECK_FALSE(a.grad().shares_storage_with(b.grad()));
    a.mutable_grad().fill_(7.0);
    CHECK(all_equal(b.grad(), 1.0));
    sum(a + b).backward();  // in-place accumulation must not leak across leaves either
    CHECK(all_equal(a.grad(), 8.0));
    CHECK(all_equal(b.grad(), 2.0));
  }
  SECTION("add pass-through from an explicit seed") {
    Tensor a = leaf({1, 2}, {2}), b = leaf({3, 4}, {2});
    Tensor seed = Tensor::from_vector(std::vector<double>{1, 1}, {2});
    (a + b).backward(seed);
    CHECK_FALSE(a.grad().shares_storage_with(seed));
    CHECK_FALSE(b.grad().shares_storage_with(seed));
    CHECK_FALSE(a.grad().shares_storage_with(b.grad()));
    seed.fill_(-1.0);
    CHECK(all_equal(a.grad(), 1.0));
    CHECK(all_equal(b.grad(), 1.0));
    (a + b).backward(seed);
    CHECK(all_equal(a.grad(), 0.0));
    CHECK(all_equal(b.grad(), 0.0));
  }
  SECTION("a transposed leaf plus a leaf, and backward on a leaf itself") {
    Tensor a = leaf({1, 2, 3, 4, 5, 6}, {2, 3}), b = leaf({0, 0, 0, 0, 0, 0}, {3, 2});
    sum(a.t() + b).backward();
    CHECK_FALSE(a.grad().shares_storage_with(b.grad()));
    CHECK(all_equal(a.grad(), 1.0));
    CHECK(all_equal(b.grad(), 1.0));
    a.mutable_grad().fill_(3.0);
    CHECK(all_equal(b.grad(), 1.0));
    Tensor c = leaf({1, 2}, {2});
    Tensor seed = Tensor::from_vector(std::vector<double>{5, 6}, {2});
    c.backward(seed);
    CHECK_FALSE(c.grad().shares_storage_with(seed));
    seed.fill_(0.0);
    CHECK(values_f64(c.grad()) == std::vector<double>{5, 6});
  }
  SECTION("clone and contiguous pass gradients through unchanged") {
    Tensor a = leaf({1, 2, 3}, {3}), b = leaf({1, 2, 3}, {3});
    sum(a.clone() + b.contiguous()).backward();
    CHECK_FALSE(a.grad().shares_storage_with(b.grad()));
    a.mutable_grad().fill_(9.0);
    CHECK(all_equal(b.grad(), 1.0));
  }
}

TEST_CASE("NoGradGuard records nothing and nests", "[autograd]") {
  Tensor x = leaf({1, 2}, {2});
  CHECK(grad_enabled());
  {
    NoGradGuard g;
    CHECK_FALSE(grad_enabled());
    Tensor y = exp(x * 2.0 + x);
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
    CHECK(autograd_meta(y) == nullptr);
    Tensor v = x.reshape({1, 2}).t().reshape({2}).slice(0, 0, 1);
    CHECK_FALSE(v.requires_grad());
    Tensor m = matmul(x.reshape({1, 2}), x.reshape({2, 1}));
    CHECK_FALSE(m.requires_grad());
    {
      NoGradGuard inner;
      CHECK_FALSE(grad_enabled());
    }
    CHECK_FALSE(grad_enabled());  // the inner guard restores "off", not "on"
  }
  CHECK(grad_enabled());
  CHECK((x * 2.0).requires_grad());
  // Grad mode is per thread.
  bool other_thread_enabled = false;
  {
    NoGradGuard g;
    std::thread t([&] { other_thread_enabled = grad_enabled(); });
    t.join();
  }
  CHECK(other_thread_enabled);
}

TEST_CASE("retain_graph allows a second backward, otherwise it throws", "[autograd]") {
  Tensor x = leaf({0.5, -1.0}, {2});
  Tensor y = sum(exp(x) * x);
  y.backward(Tensor(), /*retain_graph=*/true);
  const auto g1 = values_f64(x.grad());
  y.backward();  // allowed once more; frees the graph
  const auto g2 = values_f64(x.grad());
  for (std::size_t i = 0; i < g1.size(); ++i) CHECK(g2[i] == Approx(2 * g1[i]));
  CHECK_THROWS_WITH(y.backward(),
                    Catch::Contains("second time") && Catch::Contains("retain_graph"));
  // A fresh graph over the same leaf is fine.
  Tensor z = sum(x * 1.0);
  z.backward();
  CHECK_THROWS_WITH(z.backward(), Catch::Contains("second time"));
  // A graph with several nodes: the message names one of them.
  Tensor w = sum(sigmoid(x) * tanh(x));
  w.backward();
  CHECK_THROWS_WITH(w.backward(), Catch::Contains("Backward") && Catch::Contains("second time"));
}

TEST_CASE("a 100,000-node chain backwards and frees without deep recursion", "[autograd][deep]") {
  // Everything runs on a thread with a 1 MiB stack: destroying or walking the chain recursively
  // (one frame per node) would overflow it and crash, while an 8 MiB main stack happens to
  // survive 100k small frames. Checks happen back on the test thread (Catch2 is not thread-safe).
  constexpr int kDepth = 100000;
  SECTION("backward, then free") {
    std::vector<double> gx, gc;
    double s = 0.0;
    run_on_small_stack([&] {
      const auto t0 = std::chrono::steady_clock::now();
      Tensor x = leaf({1.0, 2.0}, {2});
      Tensor c = leaf({0.0, 0.0}, {2});  // one leaf feeding every other node
      Tensor y = x;
      for (int i = 0; i < kDepth; ++i) y = (i % 2 == 0) ? y * 1.0001 : y + c;
      sum(y).backward();
      y = Tensor();  // frees the whole chain (iteratively)
      s = seconds_since(t0);
      gx = values_f64(x.grad());
      gc = values_f64(c.grad());
    });
    const double expect = std::pow(1.0001, kDepth / 2);
    REQUIRE(gx.size() == 2);
    CHECK(gx[0] == Approx(expect).epsilon(1e-9));
    CHECK(gx[1] == Approx(expect).epsilon(1e-9));
    // d y / d c = sum over the kDepth/2 additions of the multiplications that follow each.
    double want_c = 0.0;
    for (int k = 0; k < kDepth / 2; ++k) want_c += std::pow(1.0001, k);
    CHECK(gc[0] == Approx(want_c).epsilon(1e-9));
    WARN("100k-node chain: build + backward + free took " << s << " s");
    // The budget is < 2 s (about 0.7 s on an idle 2-core machine); the bound here is generous so
    // that oversubscribed CI stays green, yet far below what quadratic work on 100k nodes takes.
    CHECK(s < 20.0);
  }
  SECTION("free without running backward") {
    bool recorded = false;
    Shape shape;
    run_on_small_stack([&] {
      Tensor x = leaf({1.0}, {1});
      Tensor y = x;
      for (int i = 0; i < kDepth / 2; ++i) y = exp(y * 0.0);  // saves tensors at every node
      recorded = y.requires_grad();
      y = Tensor();
      // And a chain whose nodes are all views of a 2-D tensor.
      Tensor z = Tensor::ones({2, 3}, DType::f64);
      z.set_requires_grad(true);
      Tensor v = z;
      for (int i = 0; i < kDepth; ++i) v = v.t();
      shape = v.sizes();
      v = Tensor();
    });
    CHECK(recorded);
    CHECK(shape == Shape{2, 3});
  }
  SECTION("freed after a retained backward, holding only the leaf") {
    double g1 = 0.0, g2 = 0.0;
    run_on_small_stack([&] {
      Tensor x = leaf({1.0}, {1});
      Tensor y = x;
      for (int i = 0; i < kDepth; ++i) y = y + 0.5;
      y.backward(Tensor(), true);
      g1 = x.grad().item();
      y = Tensor();
      g2 = x.grad().item();
    });
    CHECK(g1 == 1.0);
    CHECK(g2 == 1.0);
  }
}

TEST_CASE("backward and requires_grad errors", "[autograd][errors]") {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = x * 2.0;
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("backward") && Catch::Contains("[2,3]"));
  CHECK_THROWS_WITH(y.backward(Tensor::ones({3, 2}, DType::f64)), Catch::Contains("backward") &&
                                                                      Catch::Contains("[3,2]") &&
                                                                      Catch::Contains("[2,3]"));
  // A non-scalar with an explicit grad_output is fine.
  y.backward(Tensor::ones({2, 3}, DType::f64));
  CHECK(all_equal(x.grad(), 2.0));
  // One-element tensors of any rank may omit grad_output.
  Tensor one = leaf({3.0}, {1, 1});
  (one * 2.0).backward();
  CHECK(one.grad().item() == 2.0);

  Tensor plain = Tensor::ones({2}, DType::f64);
  CHECK_THROWS_WITH(sum(plain).backward(),
                    Catch::Contains("backward") && Catch::Contains("does not require grad"));

  Tensor i64 = Tensor::zeros({3}, DType::i64);
  CHECK_THROWS_WITH(i64.set_requires_grad(true),
                    Catch::Contains("set_requires_grad") && Catch::Contains("i64"));
  Tensor i32 = Tensor::zeros({3}, DType::i32);
  CHECK_THROWS_WITH(i32.set_requires_grad(true),
                    Catch::Contains("set_requires_grad") && Catch::Contains("i32"));
  CHECK_NOTHROW(i32.set_requires_grad(false));
  CHECK_FALSE(i32.requires_grad());
  CHECK_THROWS_WITH(y.set_requires_grad(true),
                    Catch::Contains("set_requires_grad") && Catch::Contains("MulScalarBackward"));
}

TEST_CASE("detach, unused branches and diamonds", "[autograd]") {
  Tensor x = leaf({0.3, -0.7}, {2});
  // Detach cuts the graph.
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.shares_storage_with(x));
  sum(x * d).backward();
  CHECK(max_abs_diff(x.grad(), x.detach()) == 0.0);
  x.mutable_grad() = Tensor();
  // A branch that does not reach the loss contributes nothing.
  Tensor unused = exp(x);
  sum(x * 4.0).backward();
  CHECK(all_equal(x.grad(), 4.0));
  CHECK(unused.requires_grad());
  x.mutable_grad() = Tensor();
  // Diamond: b = exp(x); loss = sum(b*b + b) -> d/dx = (2b + 1) * b.
  Tensor b = exp(x);
  sum(b * b + b).backward();
  const auto g = values_f64(x.grad());
  const auto bv = values_f64(b);
  for (int i = 0; i < 2; ++i) CHECK(g[i] == Approx((2 * bv[i] + 1) * bv[i]).epsilon(1e-12));
  // The non-leaf intermediate gets no .grad().
  CHECK_FALSE(b.grad().defined());
  CHECK_FALSE(b.is_leaf());
  // argmax is not differentiable: an int64 result with no history.
  Tensor am = argmax(b, 0);
  CHECK(am.dtype() == DType::i64);
  CHECK_FALSE(am.requires_grad());
}
