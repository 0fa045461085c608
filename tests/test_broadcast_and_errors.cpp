// SPDX-License-Identifier: Apache-2.0
// Broadcasting rules and error messages: every failure names the function and the offending
// values (DESIGN.md, Errors).
#include <catch2/catch.hpp>

#include "engine/autograd/functions.h"
#include "engine/core/views.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/gemm.h"
#include "engine/ops/reduce.h"
#include "helpers/gradcheck.h"

using namespace anvil;
using anvil::test::values_f64;
using Catch::Contains;

TEST_CASE("broadcast shapes that work", "[broadcast]") {
  struct Case {
    Shape a, b, out;
  };
  const std::vector<Case> cases = {
      {{3, 4}, {3, 4}, {3, 4}},       {{3, 4}, {4}, {3, 4}},    {{4}, {3, 4}, {3, 4}},
      {{3, 1}, {1, 4}, {3, 4}},       {{}, {2, 3}, {2, 3}},     {{2, 3}, {}, {2, 3}},
      {{5, 1, 4}, {3, 1}, {5, 3, 4}}, {{1}, {}, {1}},           {{2, 1, 1}, {1, 3, 1}, {2, 3, 1}},
      {{0, 3}, {3}, {0, 3}},          {{0, 1}, {1, 4}, {0, 4}}, {{1, 1}, {1}, {1, 1}}};
  for (const auto& c : cases) {
    INFO(shape_str(c.a) << " with " << shape_str(c.b));
    CHECK(raw::broadcast_shapes(c.a, c.b, "test") == c.out);
    CHECK(raw::broadcast_shapes(c.b, c.a, "test") == c.out);
    Tensor a = Tensor::ones(c.a), b = Tensor::full(c.b, 2.0);
    CHECK(add(a, b).sizes() == c.out);
    CHECK(mul(a, b).sizes() == c.out);
  }
  // Values: [3,1] + [1,4] is the outer sum.
  Tensor col = Tensor::from_vector(std::vector<double>{0, 10, 20}, {3, 1});
  Tensor row = Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {1, 4});
  CHECK(values_f64(col + row) == std::vector<double>{1, 2, 3, 4, 11, 12, 13, 14, 21, 22, 23, 24});
  CHECK(values_f64(row - col) ==
        std::vector<double>{1, 2, 3, 4, -9, -8, -7, -6, -19, -18, -17, -16});
  // A 0-D scalar broadcasts against anything; a 1-element 1-D too.
  Tensor s = Tensor::scalar(3.0, DType::f64);
  CHECK(values_f64(col * s) == std::vector<double>{0, 30, 60});
  CHECK(values_f64(Tensor::from_vector(std::vector<double>{2}, {1}) / col.slice(0, 1, 3)) ==
        std::vector<double>{0.2, 0.1});
  // Broadcast against a non-contiguous view.
  Tensor m = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(values_f64(m.t() + Tensor::from_vector(std::vector<double>{100, 200}, {2})) ==
        std::vector<double>{101, 204, 102, 205, 103, 206});
}

TEST_CASE("broadcast shapes that must throw name the function and both shapes",
          "[broadcast][errors]") {
  const std::vector<std::pair<Shape, Shape>> bad = {
      {{2, 3}, {4}}, {{3, 4}, {3}}, {{2, 3, 4}, {3, 3}}, {{5}, {0}}, {{2, 3}, {3, 2, 2}}};
  for (const auto& [sa, sb] : bad) {
    INFO(shape_str(sa) << " with " << shape_str(sb));
    Tensor a = Tensor::ones(sa), b = Tensor::ones(sb);
    // (Catch2 v2 matchers hold references to their parts: build each combination inline.)
    const std::string s1 = shape_str(sa), s2 = shape_str(sb);
    CHECK_THROWS_WITH(add(a, b), Contains("add") && Contains(s1) && Contains(s2));
    CHECK_THROWS_WITH(sub(a, b), Contains("sub") && Contains(s1) && Contains(s2));
    CHECK_THROWS_WITH(mul(a, b), Contains("mul") && Contains(s1) && Contains(s2));
    CHECK_THROWS_WITH(div(a, b), Contains("div") && Contains(s1) && Contains(s2));
    CHECK_THROWS_WITH(pow(a, b), Contains("pow") && Contains(s1) && Contains(s2));
    CHECK_THROWS_AS(a + b, Error);
  }
  // expand names itself and both shapes.
  CHECK_THROWS_WITH(Tensor::ones({3}).expand({2, 4}),
                    Contains("expand") && Contains("[3]") && Contains("[2,4]"));
  // In-place accumulation cannot grow the destination.
  CHECK_THROWS_WITH(ops::add_(Tensor::zeros({3}), Tensor::ones({2, 3})),
                    Contains("expand") && Contains("[2,3]") && Contains("[3]"));
}

TEST_CASE("dtype mismatches name the function and both dtypes", "[errors]") {
  Tensor f32 = Tensor::ones({2}), f64 = Tensor::ones({2}, DType::f64),
         i64 = Tensor::ones({2}, DType::i64);
  CHECK_THROWS_WITH(add(f32, f64), Contains("add") && Contains("f32") && Contains("f64"));
  CHECK_THROWS_WITH(sub(f64, f32), Contains("sub") && Contains("f64") && Contains("f32"));
  CHECK_THROWS_WITH(mul(f32, i64), Contains("mul") && Contains("f32") && Contains("i64"));
  CHECK_THROWS_WITH(div(f64, f32), Contains("div") && Contains("f64") && Contains("f32"));
  CHECK_THROWS_WITH(f32 * f64, Contains("mul") && Contains("f32") && Contains("f64"));
  // Float-only ops on integers.
  CHECK_THROWS_WITH(exp(i64), Contains("exp") && Contains("i64"));
  CHECK_THROWS_WITH(sigmoid(i64), Contains("sigmoid") && Contains("i64"));
  CHECK_THROWS_WITH(sum(i64), Contains("sum") && Contains("i64"));
  CHECK_THROWS_WITH(softmax(i64), Contains("softmax") && Contains("i64"));
  // Integer add is allowed.
  CHECK(values_f64(add(i64, i64)) == std::vector<double>{2, 2});
  // GEMM operands must agree.
  CHECK_THROWS_WITH(matmul(Tensor::ones({2, 3}), Tensor::ones({3, 2}, DType::f64)),
                    Contains("gemm") && Contains("f32") && Contains("f64"));
  CHECK_THROWS_WITH(linear(Tensor::ones({2, 3}), Tensor::ones({4, 3}, DType::f64)),
                    Contains("linear") && Contains("f32") && Contains("f64"));
  CHECK_THROWS_WITH(
      linear(Tensor::ones({2, 3}), Tensor::ones({4, 3}), Tensor::ones({4}, DType::f64)),
      Contains("linear") && Contains("f32") && Contains("f64"));
  CHECK_THROWS_WITH(dropout(i64, 0.5, true), Contains("dropout") && Contains("i64"));
}

TEST_CASE("cross_entropy rejects bad targets", "[errors][softmax]") {
  Tensor logits = Tensor::zeros({3, 5});
  CHECK_THROWS_WITH(cross_entropy(logits, Tensor::zeros({3})),  // f32 targets
                    Contains("cross_entropy") && Contains("f32") && Contains("i64"));
  CHECK_THROWS_WITH(cross_entropy(logits, Tensor::zeros({3}, DType::f64)),
                    Contains("cross_entropy") && Contains("f64"));
  // Out-of-range class ids: the message names the index and the class count.
  CHECK_THROWS_WITH(
      cross_entropy(logits, Tensor::from_vector(std::vector<std::int64_t>{0, 7, 1}, {3})),
      Contains("cross_entropy") && Contains("7") && Contains("5 classes"));
  CHECK_THROWS_WITH(
      cross_entropy(logits, Tensor::from_vector(std::vector<std::int64_t>{0, 1, 5}, {3})),
      Contains("cross_entropy") && Contains("target 5") && Contains("5 classes"));
  CHECK_THROWS_WITH(
      cross_entropy(logits, Tensor::from_vector(std::vector<std::int32_t>{-1, 1, 2}, {3})),
      Contains("cross_entropy") && Contains("-1") && Contains("5 classes"));
  CHECK_THROWS_WITH(
      cross_entropy(logits, Tensor::from_vector(std::vector<std::int32_t>{9, 1, 2}, {3})),
      Contains("cross_entropy") && Contains("9") && Contains("5 classes"));
  // Shape mismatches.
  CHECK_THROWS_WITH(cross_entropy(logits, Tensor::zeros({4}, DType::i64)),
                    Contains("cross_entropy") && Contains("[3,5]") && Contains("[4]"));
  CHECK_THROWS_WITH(cross_entropy(Tensor::zeros({5}), Tensor::zeros({1}, DType::i64)),
                    Contains("cross_entropy") && Contains("[5]"));
  // In range is fine, with either index type; the boundary class C-1 included.
  CHECK_NOTHROW(
      cross_entropy(logits, Tensor::from_vector(std::vector<std::int64_t>{0, 4, 2}, {3})));
  CHECK(
      cross_entropy(logits, Tensor::from_vector(std::vector<std::int32_t>{0, 4, 2}, {3})).item() ==
      Approx(std::log(5.0)));
}

TEST_CASE("linear and matmul shape errors", "[errors][matmul]") {
  CHECK_THROWS_WITH(linear(Tensor::ones({2, 3}), Tensor::ones({4, 5})),
                    Contains("linear") && Contains("[2,3]") && Contains("[4,5]"));
  CHECK_THROWS_WITH(linear(Tensor::ones({2, 3, 7}), Tensor::ones({4, 5})),
                    Contains("linear") && Contains("[2,3,7]") && Contains("[4,5]"));
  CHECK_THROWS_WITH(linear(Tensor::ones({2, 5}), Tensor::ones({4, 5}), Tensor::ones({3})),
                    Contains("linear") && Contains("bias") && Contains("[3]") && Contains("[4,5]"));
  CHECK_THROWS_WITH(linear(Tensor::ones({2, 5}), Tensor::ones({4, 5, 1})),
                    Contains("linear") && Contains("[4,5,1]"));
  // Inner dimensions.
  CHECK_THROWS_WITH(
      matmul(Tensor::ones({2, 3}), Tensor::ones({4, 5})),
      (Contains("gemm") || Contains("matmul")) && Contains("[2,3]") && Contains("[4,5]"));
  CHECK_THROWS_WITH(
      matmul(Tensor::ones({2, 2, 3}), Tensor::ones({2, 4, 5})),
      (Contains("gemm") || Contains("matmul")) && Contains("[2,2,3]") && Contains("[2,4,5]"));
  CHECK_THROWS_WITH(matmul(Tensor::ones({2, 2, 3}), Tensor::ones({4, 5})),
                    (Contains("gemm") || Contains("matmul")) && Contains("[4,5]"));
  CHECK_THROWS_WITH(
      matmul(Tensor::ones({2, 2, 3}), Tensor::ones({3, 3, 5})),
      (Contains("gemm") || Contains("matmul")) && Contains("[2,2,3]") && Contains("[3,3,5]"));
  CHECK_THROWS_WITH(matmul(Tensor::ones({3}), Tensor::ones({3, 2})),
                    Contains("matmul") && Contains("[3]") && Contains("[3,2]"));
  CHECK_THROWS_WITH(matmul(Tensor::ones({2, 3}), Tensor()),
                    Contains("matmul") && Contains("undefined"));
  // The raw GEMM: wrong C shape, and a C whose rows are not dense.
  CHECK_THROWS_WITH(
      ops::gemm(Tensor::ones({2, 3}), false, Tensor::ones({3, 4}), false, Tensor::zeros({2, 5})),
      Contains("gemm") && Contains("[2,5]") && Contains("[2,4]"));
  CHECK_THROWS_WITH(ops::gemm(Tensor::ones({2, 3}), false, Tensor::ones({3, 4}), false,
                              Tensor::zeros({4, 2}).t()),
                    Contains("gemm") && Contains("dense rows"));
  CHECK_THROWS_WITH(
      ops::gemm(Tensor::ones({2, 3}), true, Tensor::ones({3, 4}), false, Tensor::zeros({2, 4})),
      Contains("gemm") && Contains("transposed"));
}

TEST_CASE("gemm refuses an output whose rows or batches overlap", "[errors][matmul]") {
  // An expanded C would have every row written over the same memory (and past the end of its
  // storage when the GEMM assumes ldc = N).
  Tensor a = Tensor::ones({3, 2}), b = Tensor::ones({2, 4});
  Tensor storage = Tensor::zeros({1, 4});
  CHECK_THROWS_WITH(ops::gemm(a, false, b, false, storage.expand({3, 4})),
                    Contains("gemm") && Contains("overlap"));
  Tensor a3 = Tensor::ones({2, 3, 2}), b3 = Tensor::ones({2, 2, 4});
  Tensor c3 = Tensor::zeros({1, 3, 4});
  CHECK_THROWS_WITH(ops::gemm(a3, false, b3, false, c3.expand({2, 3, 4})),
                    Contains("gemm") && Contains("overlap"));
  // A single row or a single batch may have any stride.
  Tensor one_row = Tensor::zeros({1, 4});
  CHECK_NOTHROW(ops::gemm(Tensor::ones({1, 2}), false, b, false, one_row));
  CHECK(values_f64(one_row) == std::vector<double>{2, 2, 2, 2});
}

TEST_CASE("reductions and dim arguments reject bad dims", "[errors][reduce]") {
  Tensor x = Tensor::ones({2, 3});
  CHECK_THROWS_WITH(sum(x, {2}), Contains("sum") && Contains("dimension 2") && Contains("2-D"));
  CHECK_THROWS_WITH(sum(x, {-3}), Contains("sum") && Contains("-3") && Contains("2-D"));
  CHECK_THROWS_WITH(mean(x, {5}), Contains("mean") && Contains("5") && Contains("2-D"));
  CHECK_THROWS_WITH(sum(x, {0, 0}), Contains("sum") && Contains("twice"));
  CHECK_THROWS_WITH(sum(x, {1, -1}), Contains("sum") && Contains("twice"));
  CHECK_THROWS_WITH(max(x, 2), Contains("max") && Contains("2") && Contains("2-D"));
  CHECK_THROWS_WITH(argmax(x, -3), Contains("max") && Contains("-3"));
  CHECK_THROWS_WITH(max(Tensor::ones({2, 0}), 1),
                    Contains("max") && Contains("empty") && Contains("[2,0]"));
  CHECK_THROWS_WITH(softmax(x, 2), Contains("softmax") && Contains("2"));
  CHECK_THROWS_WITH(log_softmax(x, -3), Contains("log_softmax") && Contains("-3"));
  CHECK_THROWS_WITH(x.transpose(0, 2), Contains("transpose") && Contains("2"));
  CHECK_THROWS_WITH(x.permute({0, 0}), Contains("permute") && Contains("repeated"));
  CHECK_THROWS_WITH(x.permute({0}), Contains("permute") && Contains("[0]"));
  CHECK_THROWS_WITH(x.select(1, 3),
                    Contains("select") && Contains("index 3") && Contains("size 3"));
  CHECK_THROWS_WITH(x.squeeze(1), Contains("squeeze") && Contains("size 3"));
  CHECK_THROWS_WITH(x.slice(0, 0, 1, 0), Contains("slice") && Contains("step"));
  CHECK_THROWS_WITH(x.reshape({4, -1}), Contains("6") && Contains("[4,-1]"));
  CHECK_THROWS_WITH(x.flatten(1, 0), Contains("flatten"));
  CHECK_THROWS_WITH(dropout(x, 1.5, true), Contains("dropout") && Contains("1.5"));
  // Values of the reductions (not only their errors).
  Tensor v = Tensor::from_vector(std::vector<double>{1, 5, 3, 4, 2, 6}, {2, 3});
  CHECK(values_f64(sum(v, {0})) == std::vector<double>{5, 7, 9});
  CHECK(values_f64(mean(v, {1}, true)) == std::vector<double>{3, 4});
  CHECK(mean(v, {1}, true).sizes() == Shape{2, 1});
  CHECK(values_f64(max(v, 1)) == std::vector<double>{5, 6});
  CHECK(values_f64(argmax(v, 0)) == std::vector<double>{1, 0, 1});
  CHECK(values_f64(argmax(v, 1)) == std::vector<double>{1, 2});
  CHECK(sum(v).item() == 21.0);
}
