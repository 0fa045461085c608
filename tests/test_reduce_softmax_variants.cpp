// SPDX-License-Identifier: Apache-2.0
// The `reduce` and `softmax` tables on the CPU: every CPU variant (cpu.omp, ref) agrees on sums,
// means, max with indices, softmax / log-softmax and their backward, and the fused
// cross-entropy (i32 and i64 targets), across shapes above and below the OpenMP grain; the
// default is cpu.omp; forcing an unknown or unsuitable variant is a clear error.
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
#include "helpers/op_problems.h"
#include "helpers/variant_harness.h"
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
// fn() under every CPU variant of `table` (tests/helpers/variant_harness.h), each compared with
// the `ref` result. `problem` is the problem of fn's table calls that supports() is asked about
// (fn may make several; a variant that then declines one fails with the forced-variant error).
template <typename Problem, typename Args, typename Fn>
void against_ref(test::VariantHarness& harness, const VariantTable<Problem, Args>& table,
                 const Problem& problem, Fn&& fn, double tol, const std::string& what) {
  std::vector<Tensor> expect;
  {
    ForceVariant force(table.op(), "ref");
    expect = fn();
  }
  harness.run(table, problem, what, [&](const typename VariantTable<Problem, Args>::Variant&) {
    const std::vector<Tensor> got = fn();
    if (got.size() != expect.size()) return std::string("wrong number of outputs");
    std::string bad;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const std::string out = "output " + std::to_string(i);
      if (got[i].sizes() != expect[i].sizes())
        bad += out + " has shape " + shape_str(got[i].sizes()) + ", ref " +
               shape_str(expect[i].sizes()) + "; ";
      else
        bad += test::compare(out, got[i], expect[i], tol);
    }
    return bad;
  });
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

TEST_CASE("every CPU reduce variant agrees with ref", "[reduce][variants]") {
  register_builtin_kernels();
  const auto names = cpu_variants(reduce_table());
  test::VariantHarness harness(reduce_table(), DeviceType::cpu, 1);
  harness.require_all();
  for (DType dt : {DType::f32, DType::f64}) {
    for (const Shape& shape :
         {Shape{4, 5, 6}, Shape{3, 1, 7, 2}, Shape{300, 257}, Shape{64, 40, 33}}) {
      const Tensor x = rnd(shape, -1, 1, 7, dt);
      const auto nd = static_cast<std::int64_t>(shape.size());
      for (std::int64_t mask = 0; mask < (1 << nd); ++mask) {
        std::vector<std::int64_t> dims;
        for (std::int64_t d = 0; d < nd; ++d)
          if (mask & (1 << d)) dims.push_back(d);
        against_ref(
            harness, reduce_table(), test::reduce_problem_of(ReduceOp::sum, x),
            [&] {
              return std::vector<Tensor>{ops::sum(x, dims), ops::mean(x, dims, true)};
            },
            dt == DType::f32 ? 1e-5 : 1e-12, shape_str(shape) + " mask " + std::to_string(mask));
      }
      for (std::int64_t d = 0; d < nd; ++d)
        against_ref(
            harness, reduce_table(), test::reduce_problem_of(ReduceOp::max, x),
            [&] {
              auto [v, i] = ops::max(x, d);
              return std::vector<Tensor>{v, i};
            },
            0.0, shape_str(shape) + " max dim " + std::to_string(d));
    }
  }
  harness.finish();
  // Ties keep the first index, NaN wins and sticks to its first position.
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  const Tensor s = Tensor::from_vector(std::vector<float>{2, 2, 1, 1, 1, kNan, 3, kNan}, {2, 4});
  for (const auto& name : names) {
    ForceVariant force("reduce", name);
    auto [v, i] = ops::max(s, 1);
    CHECK(anvil::test::values_f64(i) == std::vector<double>{0, 1});
    CHECK(std::isnan(anvil::test::values_f64(v)[1]));
  }
}

TEST_CASE("every CPU softmax variant agrees with ref", "[softmax][variants]") {
  register_builtin_kernels();
  const auto names = cpu_variants(softmax_table());
  test::VariantHarness harness(softmax_table(), DeviceType::cpu, 1);
  harness.require_all();
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 2e-6 : 1e-13;
    for (const Shape& shape :
         {Shape{1, 1}, Shape{3, 7}, Shape{5, 1500}, Shape{300, 129}, Shape{4, 3, 10}}) {
      const Tensor x = rnd(shape, -6, 6, 11, dt), dy = rnd(shape, -1, 1, 12, dt);
      for (bool log : {false, true})
        against_ref(
            harness, softmax_table(),
            test::softmax_problem_of(log ? SoftmaxOp::log_softmax : SoftmaxOp::softmax, x),
            [&] {
              Tensor y = log ? ops::log_softmax(x) : ops::softmax(x);
              return std::vector<Tensor>{y, ops::softmax_backward(y, dy, log)};
            },
            tol, shape_str(shape) + (log ? " log_softmax" : " softmax"));
    }
    for (DType it : {DType::i32, DType::i64}) {
      for (const Shape& shape : {Shape{1, 3}, Shape{37, 10}, Shape{64, 2000}}) {
        const Tensor x = rnd(shape, -5, 5, 13, dt);
        const Tensor t = rnd({shape[0]}, 0, static_cast<double>(shape[1]) - 0.01, 14, it);
        against_ref(
            harness, softmax_table(),
            test::softmax_problem_of(SoftmaxOp::cross_entropy_forward, x, it),
            [&] {
              auto [loss, lse] = ops::cross_entropy_forward(x, t);
              return std::vector<Tensor>{loss, lse, ops::cross_entropy_backward(x, t, lse, 0.25)};
            },
            tol, shape_str(shape) + " cross-entropy " + std::string(dtype_name(it)));
      }
    }
  }
  harness.finish();
  // Special rows: all -inf, +inf present, NaN present.
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  const Tensor sp = Tensor::from_vector(std::vector<float>{-kInf, -kInf, 1, kInf, 0, kNan}, {3, 2});
  std::vector<double> expect;
  {
    ForceVariant force("softmax", "ref");
    expect = anvil::test::values_f64(
        ops::cross_entropy_forward(sp, Tensor::from_vector(std::vector<std::int64_t>{0, 0, 0}, {3}))
            .second);
  }
  CHECK(expect[0] == -kInf);
  CHECK(expect[1] == kInf);
  CHECK(std::isnan(expect[2]));
  for (const auto& name : names) {
    ForceVariant force("softmax", name);
    const auto got = anvil::test::values_f64(
        ops::cross_entropy_forward(sp, Tensor::from_vector(std::vector<std::int64_t>{0, 0, 0}, {3}))
            .second);
    CHECK(got[0] == expect[0]);
    CHECK(got[1] == expect[1]);
    CHECK(std::isnan(got[2]));
  }
}

TEST_CASE("every CPU variant of the cross-entropy forward with gradient agrees with ref",
          "[softmax][variants]") {
  register_builtin_kernels();
  const auto names = cpu_variants(softmax_table());
  test::VariantHarness harness(softmax_table(), DeviceType::cpu, 1);
  harness.require_all();
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 2e-6 : 1e-13;
    // Column counts around the 16-lane vectors and the 1024-element chunks; row counts below and
    // above the OpenMP grain and the 32-row blocks of the column sums.
    for (const Shape& shape :
         {Shape{1, 1}, Shape{3, 7}, Shape{37, 10}, Shape{9, 17}, Shape{70, 1025}, Shape{5, 2049}}) {
      for (DType it : {DType::i32, DType::i64}) {
        const Tensor x = rnd(shape, -8, 8, 15, dt);
        const Tensor t = rnd({shape[0]}, 0, static_cast<double>(shape[1]) - 0.01, 16, it);
        against_ref(
            harness, softmax_table(),
            test::softmax_problem_of(SoftmaxOp::cross_entropy_forward_grad, x, it),
            [&] {
              auto r = ops::cross_entropy_forward_grad(x, t, false, true);
              return std::vector<Tensor>{r.losses, r.lse, r.grad, r.col_sums};
            },
            tol * 4, shape_str(shape) + " forward_grad " + std::string(dtype_name(it)));
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
  harness.finish();
  // Special rows (all -inf, +inf present, NaN present): the lse conventions of the plain forward.
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  const Tensor sp = Tensor::from_vector(std::vector<float>{-kInf, -kInf, 1, kInf, 0, kNan}, {3, 2});
  const Tensor zeros = Tensor::from_vector(std::vector<std::int64_t>{0, 0, 0}, {3});
  for (const auto& name : names) {
    ForceVariant force("softmax", name);
    const auto got =
        anvil::test::values_f64(ops::cross_entropy_forward_grad(sp, zeros, false, false).lse);
    CHECK(got[0] == -kInf);
    CHECK(got[1] == kInf);
    CHECK(std::isnan(got[2]));
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
