// SPDX-License-Identifier: Apache-2.0
// Autocast (Note [Autocast policy]): the guard's scope, nesting and thread-locality; the op
// table's decision for each list; the ops of each list running in their stated dtype; gradients
// reaching f32 master weights in f32 through the casts; the 16-bit GEMM of `ref`.
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "anvil/anvil.h"
#include "engine/autograd/autocast.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/ops/gemm.h"
#include "helpers/gradcheck.h"
#include "helpers/half_bits.h"

using namespace anvil;
using Catch::Contains;
using test::bits_of;
using test::values_f64;

namespace {
constexpr DType kHalves[] = {DType::bf16, DType::f16};
constexpr Precision kMixed[] = {Precision::bf16, Precision::fp16};
}  // namespace

TEST_CASE("precision names parse back and unknown names are refused", "[autocast]") {
  for (const Precision p : kAllPrecisions) CHECK(parse_precision(precision_name(p)) == p);
  CHECK_THROWS_WITH(parse_precision("fp8"), Contains("fp8") && Contains("bf16"));
  CHECK(low_precision_dtype(Precision::bf16) == DType::bf16);
  CHECK(low_precision_dtype(Precision::fp16) == DType::f16);
  CHECK(low_precision_dtype(Precision::tf32) == DType::f32);
}

TEST_CASE("AutocastGuard is scoped, nests and is per thread", "[autocast]") {
  CHECK(autocast_precision() == Precision::fp32);
  CHECK_FALSE(autocast_enabled());
  {
    const AutocastGuard outer(Precision::bf16);
    CHECK(autocast_precision() == Precision::bf16);
    CHECK(autocast_enabled());
    {
      const AutocastGuard inner(Precision::fp16);
      CHECK(autocast_precision() == Precision::fp16);
      {
        const AutocastGuard off(Precision::fp32);  // torch.autocast(enabled=False)
        CHECK_FALSE(autocast_enabled());
      }
      CHECK(autocast_precision() == Precision::fp16);
    }
    CHECK(autocast_precision() == Precision::bf16);
    Precision seen_by_worker = Precision::bf16;
    std::thread worker([&] { seen_by_worker = autocast_precision(); });
    worker.join();
    CHECK(seen_by_worker == Precision::fp32);
  }
  CHECK(autocast_precision() == Precision::fp32);
}

TEST_CASE("the op table's decision per list, input dtype and precision", "[autocast]") {
  for (const Precision p : kMixed) {
    const DType low = low_precision_dtype(p);
    INFO(precision_name(p));
    for (const AutocastOp& entry : kAutocastOps) {
      INFO(entry.op);
      CHECK(autocast_list_of(entry.op) == entry.list);
      if (entry.list == AutocastList::low_precision) {
        CHECK(autocast_dtype(entry.op, DType::f32, p) == low);
        CHECK(autocast_dtype(entry.op, DType::f64, p) == low);
      } else {
        CHECK(entry.list == AutocastList::fp32);
        for (const DType h : kHalves) CHECK(autocast_dtype(entry.op, h, p) == DType::f32);
        CHECK(autocast_dtype(entry.op, DType::f64, p) == DType::f64);  // never narrowed
      }
      CHECK(autocast_dtype(entry.op, DType::i64, p) == DType::i64);  // labels stay
      CHECK(autocast_dtype(entry.op, DType::f32, Precision::fp32) == DType::f32);
      CHECK(autocast_dtype(entry.op, DType::bf16, Precision::tf32) == DType::bf16);
    }
    CHECK(autocast_list_of("relu") == AutocastList::unlisted);
    CHECK(autocast_dtype("relu", DType::bf16, p) == DType::bf16);
  }
  CHECK(describe_autocast("linear", DType::f32, Precision::bf16) ==
        "anvil autocast: op=linear list=low_precision precision=bf16 input=f32 runs=bf16");
  CHECK(describe_autocast("softmax", DType::f16, Precision::fp16) ==
        "anvil autocast: op=softmax list=fp32 precision=fp16 input=f16 runs=f32");
}

TEST_CASE("the 16-bit GEMM of ref is the exact product rounded once", "[autocast][gemm]") {
  Generator g(11);
  const Tensor a32 = uniform({7, 13}, -2.0, 2.0, DType::f32, &g);
  const Tensor b32 = uniform({13, 5}, -2.0, 2.0, DType::f32, &g);
  for (const DType t : kHalves) {
    INFO(dtype_name(t));
    const Tensor a = a32.to(t), b = b32.to(t);
    // The problem names the dtype. The faster 16-bit variants (kernels/cpu/bf16/) come before
    // ref in the table's order, so ref is forced: a ref that refused 16-bit would throw here.
    const Tensor c = Tensor::empty({7, 5}, t);
    const GemmProblem p = ops::gemm_problem_for(a, false, b, false, c, 0.0);
    CHECK_THAT(p.repr(), Contains(std::string(dtype_name(t))));
    // ref accumulates in double: the f64 product of the widened inputs, rounded to t once.
    const ForceVariant force("gemm", "ref");
    const Tensor expected = ops::mm(a.to(DType::f64), false, b.to(DType::f64), false).to(t);
    CHECK(bits_of(ops::mm(a, false, b, false)) == bits_of(expected));
    // All four transpose modes read the same logical operands.
    const Tensor at = a.t().contiguous(), bt = b.t().contiguous();
    CHECK(bits_of(ops::mm(at, true, bt, true)) == bits_of(expected));
    CHECK(bits_of(ops::mm(a, false, bt, true)) == bits_of(expected));
    CHECK(bits_of(ops::mm(at, true, b, false)) == bits_of(expected));
  }
}

TEST_CASE("low-precision list: linear and matmul run in the low type", "[autocast]") {
  Generator g(3);
  const Tensor x = uniform({6, 9}, -1.0, 1.0, DType::f32, &g);
  const Tensor w = uniform({4, 9}, -1.0, 1.0, DType::f32, &g);
  const Tensor bias = uniform({4}, -1.0, 1.0, DType::f32, &g);
  for (const Precision p : kMixed) {
    const DType low = low_precision_dtype(p);
    INFO(precision_name(p));
    Tensor y;
    Tensor m;
    {
      const AutocastGuard autocast(p);
      y = linear(x, w, bias);
      m = matmul(x, w.t());
    }
    REQUIRE(y.dtype() == low);
    REQUIRE(m.dtype() == low);
    // The same ops on inputs cast by hand, without autocast: the same bits.
    CHECK(bits_of(y) == bits_of(linear(x.to(low), w.to(low), bias.to(low))));
    CHECK(bits_of(m) == bits_of(matmul(x.to(low), w.t().to(low))));
    // And within the type's rounding of the f32 result (bf16 keeps 8 significant bits, f16 11;
    // the inputs are rounded too, so allow a few units in the last place of |y| <= ~3).
    const double tol = low == DType::bf16 ? 0.05 : 0.01;
    CHECK(test::max_abs_diff(y.to(DType::f64), linear(x, w, bias).to(DType::f64)) < tol);
    // After the guard: f32 again.
    CHECK(linear(x, w, bias).dtype() == DType::f32);
  }
}

TEST_CASE("fp32 list: softmax, cross-entropy and sum cast 16-bit inputs up", "[autocast]") {
  Generator g(4);
  const Tensor logits32 = uniform({5, 7}, -3.0, 3.0, DType::f32, &g);
  const Tensor target = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, 3, 4}, {5});
  for (const Precision p : kMixed) {
    const DType low = low_precision_dtype(p);
    INFO(precision_name(p));
    const Tensor logits = logits32.to(low);
    // Without autocast the 16-bit softmax is refused (no 16-bit softmax kernel): the cast is
    // what makes it run.
    CHECK_THROWS(softmax(logits));
    const AutocastGuard autocast(p);
    const Tensor s = softmax(logits);
    CHECK(s.dtype() == DType::f32);
    CHECK(values_f64(s) == values_f64(softmax(logits.to(DType::f32))));
    CHECK(log_softmax(logits).dtype() == DType::f32);
    const Tensor ce = cross_entropy(logits, target);
    CHECK(ce.dtype() == DType::f32);
    CHECK(values_f64(ce) == values_f64(cross_entropy(logits.to(DType::f32), target)));
    CHECK(sum(logits).dtype() == DType::f32);
    CHECK(mean(logits, {1}).dtype() == DType::f32);
    // An f32 input is left alone (fp32 list ops never narrow).
    CHECK(sum(logits32).dtype() == DType::f32);
  }
}

TEST_CASE("gradients reach f32 master weights in f32 through the casts", "[autocast]") {
  Generator g(9);
  const Tensor x = uniform({8, 6}, -1.0, 1.0, DType::f32, &g);
  const Tensor target = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, 0, 1, 2, 0, 1}, {8});
  for (const Precision p : kMixed) {
    INFO(precision_name(p));
    Tensor w = uniform({5, 6}, -0.5, 0.5, DType::f32, &g);
    Tensor b = Tensor::zeros({5});
    w.set_requires_grad(true);
    b.set_requires_grad(true);
    Tensor w_ref = w.detach().clone();
    Tensor b_ref = b.detach().clone();
    w_ref.set_requires_grad(true);
    b_ref.set_requires_grad(true);
    {
      const AutocastGuard autocast(p);
      const Tensor h = linear(x, w, b);  // low type
      REQUIRE(h.dtype() == low_precision_dtype(p));
      cross_entropy(h, target).backward();  // f32 loss
    }
    cross_entropy(linear(x, w_ref, b_ref), target).backward();
    REQUIRE(w.grad().defined());
    CHECK(w.dtype() == DType::f32);
    CHECK(w.grad().dtype() == DType::f32);
    CHECK(b.grad().dtype() == DType::f32);
    // The low-precision gradient is the f32 one within the type's rounding.
    const double tol = p == Precision::bf16 ? 0.02 : 0.003;
    CHECK(test::max_abs_diff(w.grad(), w_ref.grad()) < tol);
    CHECK(test::max_abs_diff(b.grad(), b_ref.grad()) < tol);
    CHECK(test::max_abs_diff(w.grad(), w_ref.grad()) > 0.0);  // it did run in the low type
  }
}

TEST_CASE("dropout of a 16-bit activation draws the f32 mask and rounds once", "[autocast]") {
  Generator g(2);
  const Tensor x32 = uniform({10, 12}, -1.0, 1.0, DType::f32, &g);
  for (const DType t : kHalves) {
    INFO(dtype_name(t));
    const Tensor x = x32.to(t);
    Generator g1(7);
    Generator g2(7);
    const Tensor y = dropout(x, 0.2, true, &g1);
    REQUIRE(y.dtype() == t);
    CHECK(bits_of(y) == bits_of(dropout(x.to(DType::f32), 0.2, true, &g2).to(t)));
  }
}
