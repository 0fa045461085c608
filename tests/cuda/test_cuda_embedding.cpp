// SPDX-License-Identifier: Apache-2.0
// cuda.custom.embedding against the CPU `ref` variant: forward and backward bit for bit (the
// backward sums each id's rows in position order, Note [Deterministic embedding backward]),
// f32/f64, i32/i64, repeated ids, sizes not multiples of 32 and the LSTM models' shapes
// (PTB: V=10000, D=200/650, n=20x35; IMDB-like: V=5000, D=32); the same result run after run;
// autograd's embedding on the GPU with a float64 gradient through it; out-of-range ids reported
// at the next wait. Runs only with a GPU.
#include <catch2/catch.hpp>

#include <vector>

#include "engine/autograd/functions.h"
#include "engine/core/cuda_backend.h"
#include "engine/core/random.h"
#include "engine/dispatch/embedding_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/ops/lstm.h"
#include "harness/op_driver.h"
#include "helpers/driver_loop.h"
#include "helpers/embedding_cases.h"
#include "kernels/register.h"

using namespace anvil;
using Catch::Matchers::Contains;

namespace {

const Device kGpu = Device::cuda(0);
constexpr int kMinProblems = 20;

struct Shape3 {
  std::int64_t rows, dim, n;
};

}  // namespace

TEST_CASE("cuda.custom.embedding equals ref bit for bit", "[cuda][embedding]") {
  register_builtin_kernels();
  REQUIRE(embedding_table().find("cuda.custom.embedding") != nullptr);
  const std::vector<Shape3> shapes = {{1, 1, 1},         {10, 4, 7},        {33, 17, 65},
                                      {7, 129, 31},      {100, 1, 300},     {5, 3, 4097},
                                      {10000, 200, 700}, {10000, 650, 700}, {5000, 32, 2000}};
  // Every CUDA variant runs every problem and pass, twice with the same bits (the embedding
  // driver, harness/drivers/embedding_driver.cpp); the default through ops::embedding lands on
  // the GPU with ref's bits too.
  const harness::OpDriver* driver = harness::find_driver("embedding");
  REQUIRE(driver != nullptr);
  std::vector<nn::NamedProblem> problems;
  for (DType dtype : {DType::f32, DType::f64})
    for (DType idt : {DType::i32, DType::i64})
      for (const Shape3& s : shapes) {
        const EmbeddingProblem p{EmbeddingPass::forward, dtype, idt, kGpu, s.rows, s.dim, s.n};
        problems.push_back({p.repr(), p});
      }
  test::DriverLoopOptions options;
  options.minimum = static_cast<int>(problems.size()) * 2;  // both passes of every problem
  CHECK(test::run_driver_loop(*driver, problems, kGpu, options) >= kMinProblems);
  for (DType dtype : {DType::f32, DType::f64})
    for (DType idt : {DType::i32, DType::i64})
      for (const Shape3& s : shapes) {
        INFO(dtype_name(dtype) << " ids " << dtype_name(idt) << " rows=" << s.rows
                               << " dim=" << s.dim << " n=" << s.n);
        const auto seed = static_cast<std::uint64_t>(s.rows + s.n);
        Generator gen(seed);
        const Tensor ids = test::random_ids(s.n, s.rows, idt, static_cast<std::uint64_t>(s.dim));
        const Tensor w = normal({s.rows, s.dim}, 0, 1, dtype, &gen);
        const Tensor dy = normal({s.n, s.dim}, 0, 1, dtype, &gen);
        Tensor ref_out, ref_grad;
        {
          ForceVariant f("embedding", "ref");
          ref_out = ops::embedding(w, ids);
          ref_grad = ops::embedding_backward(dy, ids, s.rows);
        }
        const Tensor gids = ids.to(kGpu);
        const Tensor out = ops::embedding(w.to(kGpu), gids);
        const Tensor grad = ops::embedding_backward(dy.to(kGpu), gids, s.rows);
        CHECK(out.device() == kGpu);
        CHECK(test::bit_equal(out, ref_out));
        CHECK(test::bit_equal(grad, ref_grad));
      }
}

TEST_CASE("embedding on the GPU through autograd, float64 gradient check", "[cuda][embedding]") {
  Generator gen(11);
  const Tensor w0 = normal({9, 5}, 0, 1, DType::f64, &gen);
  const Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{3, 8, 3, 0, 3, 7}, {2, 3});
  const Tensor r = normal({2, 3, 5}, 0, 1, DType::f64, &gen);  // loss = sum(r * embedding)
  Tensor w = w0.to(kGpu);
  w.set_requires_grad(true);
  Tensor loss = sum(mul(embedding(w, ids.to(kGpu)), r.to(kGpu)));
  loss.backward();
  const Tensor g = w.grad().to(Device::cpu());
  // Central differences on the host composition of the same loss.
  const auto host_loss = [&](const Tensor& wt) { return sum(mul(embedding(wt, ids), r)).item(); };
  const double eps = 1e-6;
  for (std::int64_t i = 0; i < w0.numel(); ++i) {
    Tensor plus = w0.clone(), minus = w0.clone();
    plus.data<double>()[i] += eps;
    minus.data<double>()[i] -= eps;
    const double fd = (host_loss(plus) - host_loss(minus)) / (2 * eps);
    INFO("element " << i);
    CHECK(g.data<double>()[i] == Approx(fd).margin(1e-7));
  }
}

TEST_CASE("an out-of-range id on the GPU is reported at the next wait", "[cuda][embedding]") {
  const Tensor w = Tensor::ones({4, 2}, DType::f32, kGpu);
  const Tensor bad = Tensor::from_vector(std::vector<std::int64_t>{0, 3, 4, 9}, {4}).to(kGpu);
  Tensor out;
  CHECK_NOTHROW(out = ops::embedding(w, bad));  // queued, not waited for
  CHECK_THROWS_WITH(out.to(Device::cpu()), Contains("embedding") &&
                                               Contains("id 4 at position 2") &&
                                               Contains("table of 4 rows") && Contains("cuda:0"));
  CHECK_NOTHROW(require_cuda("test").synchronize(0));  // reported once
}
