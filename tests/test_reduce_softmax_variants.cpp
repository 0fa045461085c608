// SPDX-License-Identifier: Apache-2.0
// The `reduce` and `softmax` tables on the CPU beyond the driver loop (every variant against
// `ref` on the drivers' shapes: harness/drivers/reduce_driver.cpp, softmax_driver.cpp,
// tests/test_op_drivers.cpp): the tables' order and default, ties and NaN in max, special rows of
// the cross-entropy, the forward with gradient equal to the separate forward and backward and in
// place, out-of-range class ids and unknown or unsuitable variants refused clearly.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/core/views.h"
#include "engine/dispatch/reduce_problem.h"
#include "engine/dispatch/softmax_problem.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"
#include "helpers/gradcheck.h"
#include "kernels/register.h"

using namespace anvil;
using anvil::test::max_abs_diff;
using anvil::test::uniform_leaf;
using Catch::Matchers::Contains;

namespace {
Tensor rnd(const Shape& shape, double low, double high, std::uint64_t seed, DType dt = DType::f32) {
  return raw::to_dtype(uniform_leaf(shape, low, high, seed, false), dt);
}
// Names of the CPU variants of a table.
template <typename Table>
std::vector<std::string> cpu_variants(const Table& table) {
  std::vector<std::string> out;
  for (const auto& v : table.variants())
    if (v.device == DeviceType::cpu) out.push_back(v.name);
  return out;
}
}  // namespace

TEST_CASE("reduce and softmax tables list cpu.omp first and ref last",
          "[reduce][softmax][variants]") {
  register_builtin_kernels();
  for (const auto* op : {"reduce", "softmax"}) {
    const VariantTableBase* t = find_variant_table(op);
    REQUIRE(t != nullptr);
    const auto list = t->list();
    REQUIRE(list.size() >= 2);
    CHECK(list.back().name == "ref");
    std::string first_cpu;
    for (const auto& v : list)
      if (v.device == DeviceType::cpu) {
        first_cpu = v.name;
        break;
      }
    CHECK(first_cpu == "cpu.omp");
  }
  ReduceProblem rp;
  rp.outer = 4;
  rp.reduce = 5;
  CHECK(reduce_table().select(rp).name == "cpu.omp");
  SoftmaxProblem sp;
  sp.rows = 4;
  sp.cols = 5;
  CHECK(softmax_table().select(sp).name == "cpu.omp");
}

TEST_CASE("every CPU max keeps the first of ties and a NaN", "[reduce][variants]") {
  register_builtin_kernels();
  const auto names = cpu_variants(reduce_table());
  // Ties keep the first index, NaN wins and sticks to its first position (the drivers' values
  // have no ties: harness/drivers/reduce_driver.cpp).
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  const Tensor s = Tensor::from_vector(std::vector<float>{2, 2, 1, 1, 1, kNan, 3, kNan}, {2, 4});
  for (const auto& name : names) {
    ForceVariant force("reduce", name);
    auto [v, i] = ops::max(s, 1);
    CHECK(anvil::test::values_f64(i) == std::vector<double>{0, 1});
    CHECK(std::isnan(anvil::test::values_f64(v)[1]));
  }
}

// Special rows (all -inf, +inf present, NaN present): -inf, +inf and NaN log-sum-exps, in the
// plain forward and the forward with gradient alike.
TEST_CASE("every CPU cross-entropy keeps the log-sum-exp of special rows", "[softmax][variants]") {
  register_builtin_kernels();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  const Tensor sp = Tensor::from_vector(std::vector<float>{-kInf, -kInf, 1, kInf, 0, kNan}, {3, 2});
  const Tensor zeros = Tensor::from_vector(std::vector<std::int64_t>{0, 0, 0}, {3});
  for (const auto& name : cpu_variants(softmax_table())) {
    ForceVariant force("softmax", name);
    for (const Tensor& lse : {ops::cross_entropy_forward(sp, zeros).second,
                              ops::cross_entropy_forward_grad(sp, zeros, false, false).lse}) {
      const auto got = anvil::test::values_f64(lse);
      CHECK(got[0] == -kInf);
      CHECK(got[1] == kInf);
      CHECK(std::isnan(got[2]));
    }
  }
}

// Every variant of each op against ref is the driver loop's; here the ops agree with each other.
TEST_CASE("every CPU cross-entropy forward with gradient equals the forward and backward",
          "[softmax][variants]") {
  register_builtin_kernels();
  const auto names = cpu_variants(softmax_table());
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 2e-6 : 1e-13;
    // Column counts around the 16-lane vectors and the 1024-element chunks; row counts below and
    // above the OpenMP grain and the 32-row blocks of the column sums.
    for (const Shape& shape :
         {Shape{1, 1}, Shape{3, 7}, Shape{37, 10}, Shape{9, 17}, Shape{70, 1025}, Shape{5, 2049}}) {
      for (DType it : {DType::i32, DType::i64}) {
        const Tensor x = rnd(shape, -8, 8, 15, dt);
        const Tensor t = rnd({shape[0]}, 0, static_cast<double>(shape[1]) - 0.01, 16, it);
        for (const auto& name : names) {
          ForceVariant force("softmax", name);
          INFO(name << ' ' << shape_str(shape));
          // Same values as the separate forward and backward (scale 1).
          auto [loss, lse] = ops::cross_entropy_forward(x, t);
          const Tensor dx = ops::cross_entropy_backward(x, t, lse, 1.0);
          auto r = ops::cross_entropy_forward_grad(x, t, false, true);
          CHECK(max_abs_diff(r.losses, loss) <= tol * 8);
          CHECK(max_abs_diff(r.lse, lse) <= tol * 8);
          CHECK(max_abs_diff(r.grad, dx) <= tol);
          CHECK(max_abs_diff(r.col_sums, ops::sum(dx, {0})) <= tol * static_cast<double>(shape[0]));
          // In place: the gradient lands in the logits' own buffer, with the same values.
          Tensor y = x.clone();
          auto q = ops::cross_entropy_forward_grad(y, t, true, false);
          CHECK(q.grad.data_ptr() == y.data_ptr());
          CHECK(!q.col_sums.defined());
          CHECK(max_abs_diff(y, r.grad) == 0.0);
          CHECK(max_abs_diff(q.losses, r.losses) == 0.0);
        }
      }
    }
  }
}

TEST_CASE("the cross-entropy forward with gradient checks its input before writing",
          "[softmax][variants]") {
  register_builtin_kernels();
  const Tensor bad = Tensor::from_vector(std::vector<std::int64_t>{0, 4, 1}, {3});
  for (const auto& name : cpu_variants(softmax_table())) {
    ForceVariant force("softmax", name);
    Tensor x = rnd({3, 4}, -1, 1, 22);
    const Tensor before = x.clone();
    CHECK_THROWS_WITH(ops::cross_entropy_forward_grad(x, bad, true, true),
                      Contains("target 4 at row 1 is out of range for 4 classes"));
    CHECK(max_abs_diff(x, before) == 0.0);  // the in-place logits are untouched
  }
  const Tensor strided = raw::transpose(rnd({4, 3}, -1, 1, 23), 0, 1);
  CHECK_THROWS_WITH(
      ops::cross_entropy_forward_grad(
          strided, Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2}, {3}), true, false),
      Contains("cross_entropy_forward_grad") && Contains("dense"));
}

TEST_CASE("cross-entropy variants reject out-of-range class ids", "[softmax][variants]") {
  register_builtin_kernels();
  const Tensor x = rnd({3, 4}, -1, 1, 20);
  const Tensor bad = Tensor::from_vector(std::vector<std::int64_t>{0, 4, 1}, {3});
  for (const auto& name : cpu_variants(softmax_table())) {
    ForceVariant force("softmax", name);
    CHECK_THROWS_WITH(ops::cross_entropy_forward(x, bad),
                      Contains("target 4 at row 1 is out of range for 4 classes"));
  }
}

TEST_CASE("forcing an unknown reduce or softmax variant is a clear error",
          "[reduce][softmax][variants]") {
  register_builtin_kernels();
  const Tensor x = rnd({3, 4}, -1, 1, 21);
  {
    ForceVariant force("reduce", "cpu.nonexistent");
    CHECK_THROWS_WITH(ops::sum(x, {1}), Contains("reduce") && Contains("cpu.nonexistent"));
  }
  {
    ForceVariant force("softmax", "cuda.nonexistent");
    CHECK_THROWS_WITH(ops::softmax(x), Contains("softmax") && Contains("cuda.nonexistent"));
  }
  // A registered variant that does not support the problem: integer tensors are refused by the
  // ops before dispatch, so the check is on the table itself.
  ReduceProblem p;
  p.dtype = DType::i32;
  CHECK_THROWS_WITH(reduce_table().select(p), Contains("f32/f64 only"));
}
