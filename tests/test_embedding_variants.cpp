// SPDX-License-Identifier: Apache-2.0
// The embedding table on the CPU (engine/dispatch/embedding_problem.h): every CPU variant
// against `ref`, bit for bit, over f32/f64 values, i32/i64 ids, repeated and unused ids and
// sizes that are not multiples of 32; the id range check; ops::embedding and its backward
// through the table. Each variant must run at least kMinProblems problems.
#include <catch2/catch.hpp>

#include <vector>

#include "engine/core/random.h"
#include "engine/dispatch/embedding_problem.h"
#include "engine/ops/lstm.h"
#include "helpers/embedding_cases.h"
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

}  // namespace

TEST_CASE("embedding CPU variants equal ref bit for bit", "[embedding][variants]") {
  register_builtin_kernels();
  // Every CPU variant runs every problem (tests/helpers/embedding_cases.h), at least
  // kMinProblems.
  test::VariantHarness harness(embedding_table(), DeviceType::cpu, kMinProblems);
  harness.require_all();
  harness.skip_ref();  // the oracle
  int problems = 0;
  for (DType dtype : {DType::f32, DType::f64})
    for (DType idt : {DType::i32, DType::i64})
      for (const Case& c : kCases) {
        test::check_embedding_variants(harness, dtype, idt, c.rows, c.dim, c.n, Device::cpu(),
                                       static_cast<std::uint64_t>(c.rows * 31 + c.n));
        problems += 2;
      }
  CHECK(problems >= kMinProblems);
  CHECK(harness.finish() == 0);
  int checked = 0;
  for (const auto& v : embedding_table().variants())
    checked += v.device == DeviceType::cpu && v.name != "ref";
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
