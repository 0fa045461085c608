// SPDX-License-Identifier: Apache-2.0
// The embedding table on the CPU (engine/dispatch/embedding_problem.h): every CPU variant
// against `ref`, bit for bit, over f32/f64 values, i32/i64 ids, repeated and unused ids and
// sizes that are not multiples of 32; the id range check; ops::embedding and its backward
// through the table. Each variant must run at least kMinProblems problems.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "engine/core/random.h"
#include "engine/dispatch/embedding_problem.h"
#include "engine/ops/lstm.h"
#include "kernels/register.h"

using namespace anvil;
using Catch::Matchers::Contains;

namespace {

constexpr int kMinProblems = 16;

struct Case {
  std::int64_t rows, dim, n;
};
const std::vector<Case> kCases = {{1, 1, 1},    {10, 4, 7},     {33, 17, 65},   {100, 1, 300},
                                  {7, 129, 31}, {1000, 40, 10}, {50, 200, 500}, {3, 5, 1}};

Tensor random_ids(std::int64_t n, std::int64_t rows, DType dtype, std::uint64_t seed) {
  // Skewed towards small ids so that repeats are common and some rows stay unused.
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (auto& x : v) {
    const std::int64_t a = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rows));
    const std::int64_t b = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rows));
    x = std::min(a, b);
  }
  const Tensor t = Tensor::from_vector(v, {n});
  return dtype == DType::i64 ? t : t.to(DType::i32);
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

Tensor run_variant(const EmbeddingTable::Variant& v, EmbeddingPass pass, const Tensor& ids,
                   const Tensor& src, std::int64_t rows, std::int64_t dim) {
  EmbeddingArgs a;
  a.problem = {pass, src.dtype(), ids.dtype(), Device::cpu(), rows, dim, ids.numel()};
  a.ids = ids.data_ptr();
  Tensor out;
  if (pass == EmbeddingPass::forward) {
    out = Tensor::full({ids.numel(), dim}, 7.0, src.dtype());  // every element must be written
    a.weight = src.data_ptr();
    a.out = out.data_ptr();
  } else {
    out = Tensor::full({rows, dim}, 7.0, src.dtype());  // grad is written whole
    a.dy = src.data_ptr();
    a.grad = out.data_ptr();
  }
  REQUIRE(v.supports(a.problem).ok);
  v.fn(a);
  return out;
}

}  // namespace

TEST_CASE("embedding CPU variants equal ref bit for bit", "[embedding][variants]") {
  register_builtin_kernels();
  const auto* ref = embedding_table().find("ref");
  REQUIRE(ref != nullptr);
  int checked = 0;
  for (const auto& v : embedding_table().variants()) {
    if (v.device != DeviceType::cpu || v.name == "ref") continue;
    int problems = 0;
    for (DType dtype : {DType::f32, DType::f64})
      for (DType idt : {DType::i32, DType::i64})
        for (const Case& c : kCases) {
          INFO(v.name << " " << dtype_name(dtype) << " " << dtype_name(idt) << " rows=" << c.rows
                      << " dim=" << c.dim << " n=" << c.n);
          Generator gen(static_cast<std::uint64_t>(c.rows * 31 + c.n));
          const Tensor ids = random_ids(c.n, c.rows, idt, static_cast<std::uint64_t>(c.dim));
          const Tensor w = normal({c.rows, c.dim}, 0, 1, dtype, &gen);
          const Tensor dy = normal({c.n, c.dim}, 0, 1, dtype, &gen);
          CHECK(bit_equal(run_variant(v, EmbeddingPass::forward, ids, w, c.rows, c.dim),
                          run_variant(*ref, EmbeddingPass::forward, ids, w, c.rows, c.dim)));
          CHECK(bit_equal(run_variant(v, EmbeddingPass::backward, ids, dy, c.rows, c.dim),
                          run_variant(*ref, EmbeddingPass::backward, ids, dy, c.rows, c.dim)));
          problems += 2;
        }
    CHECK(problems >= kMinProblems);
    ++checked;
  }
  CHECK(checked >= 1);  // cpu.omp at least
}

TEST_CASE("embedding through the table: values, gradient and the id check",
          "[embedding][variants]") {
  Generator gen(3);
  const Tensor w = normal({6, 3}, 0, 1, DType::f64, &gen);
  const Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{5, 0, 5, 2}, {2, 2});
  const Tensor out = ops::embedding(w, ids);
  REQUIRE(out.sizes() == Shape{2, 2, 3});
  for (int j = 0; j < 3; ++j) {
    CHECK(out.data<double>()[j] == w.data<double>()[5 * 3 + j]);
    CHECK(out.data<double>()[6 + j] == w.data<double>()[5 * 3 + j]);
  }
  const Tensor dy = normal({2, 2, 3}, 0, 1, DType::f64, &gen);
  const Tensor g = ops::embedding_backward(dy, ids, 6);
  REQUIRE(g.sizes() == Shape{6, 3});
  for (int j = 0; j < 3; ++j) {
    CHECK(g.data<double>()[5 * 3 + j] == dy.data<double>()[j] + dy.data<double>()[6 + j]);
    CHECK(g.data<double>()[1 * 3 + j] == 0.0);  // unused row
  }
  CHECK_THROWS_WITH(ops::embedding(w, Tensor::from_vector(std::vector<std::int32_t>{1, 6}, {2})),
                    Contains("embedding") && Contains("id 6 at position 1") && Contains("0..5"));
  // A problem no variant supports is refused with the reasons.
  EmbeddingProblem bad;
  bad.dtype = DType::i64;
  bad.rows = bad.dim = bad.n = 1;
  CHECK_THROWS_WITH(embedding_table().select(bad), Contains("f32 or f64"));
}
