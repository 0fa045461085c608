// SPDX-License-Identifier: Apache-2.0
// The embedding table on the CPU (engine/dispatch/embedding_problem.h): every CPU variant
// against `ref`, bit for bit and the same bits run after run, over f32/f64 values, i32/i64 ids,
// repeated and unused ids and sizes that are not multiples of 32 (the embedding driver's group,
// harness/drivers/embedding_driver.cpp); the id range check; ops::embedding and its backward
// through the table.
#include <catch2/catch.hpp>

#include <vector>

#include "engine/core/random.h"
#include "engine/dispatch/embedding_problem.h"
#include "engine/ops/lstm.h"
#include "harness/op_driver.h"
#include "helpers/driver_loop.h"
#include "kernels/register.h"

using namespace anvil;
using Catch::Matchers::Contains;

TEST_CASE("embedding CPU variants equal ref bit for bit", "[embedding][variants]") {
  register_builtin_kernels();
  // Every CPU variant runs every problem and pass of the driver's group (its minimum).
  const harness::OpDriver* d = harness::find_driver("embedding");
  REQUIRE(d != nullptr);
  CHECK(test::run_driver_group(*d, "skewed", Device::cpu(), /*run_ref=*/false) ==
        static_cast<int>(d->group("skewed").size()) * 2);
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
