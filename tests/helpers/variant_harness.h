// SPDX-License-Identifier: Apache-2.0
#pragma once
// VariantHarness: the one variant-vs-`ref` loop of the op tests (DESIGN.md, Tests; in the spirit
// of ggml's test-backend-ops), on the CPU and the GPU alike. For one problem it asks every
// registered variant of the harness's device (opt-in ones included) whether it supports it, runs
// each supporting one forced by name through the test's check function, and records the tally
// (tests/helpers/variant_tally.h); finish() fails the test for a variant under the stated
// minimum. The check function builds the variant's outputs, compares them with the oracle (`ref`
// run on the CPU on the same values, in f64 where the test says so; GPU outputs are copied to the
// host) and returns "" or what is wrong; the harness fails with the op, the variant, the
// problem's repro and that message.
// Also here: the comparison helpers every op test shares (max_error, compare, max_abs,
// scaled_error); max_abs_diff and values_f64 are in tests/helpers/gradcheck.h.
#include <catch2/catch.hpp>

#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/dispatch/selection.h"
#include "engine/dispatch/trial_timer.h"
#include "engine/dispatch/variant_table.h"
#include "harness/op_driver.h"
#include "helpers/variant_tally.h"

namespace anvil::test {

// ---- comparisons ---------------------------------------------------------------------------

// The worst element of |got - want| (a NaN difference counts as infinite).
struct MaxError {
  double worst = 0.0;  // 0 for empty inputs
  std::size_t at = 0;  // flat index of the worst element
  double got = 0.0, want = 0.0;
  bool size_mismatch = false;
};
MaxError max_error(const std::vector<double>& got, const std::vector<double>& want);
// Any dtype, any device (copied to the host), compared in f64 in row-major order.
MaxError max_error(const Tensor& got, const Tensor& want);
// Max |value| of a tensor (any dtype and device) or a list.
double max_abs(const Tensor& t);
double max_abs(const std::vector<double>& v);
// "" when every |got - want| <= tol, else "<what>: worst |got - ref| = ... > tol ... at ...; "
// (messages end with "; " so that a check can concatenate several).
std::string compare(const std::string& what, const Tensor& got, const Tensor& want, double tol);
std::string compare(const std::string& what, const std::vector<double>& got,
                    const std::vector<double>& want, double tol);
// max |got - want| / max(1, max finite |want|): a scale-aware worst error (infinite for a NaN
// difference or a size mismatch; with nan_matches_nan, elements NaN on both sides agree).
double scaled_error(const Tensor& got, const Tensor& want, bool nan_matches_nan = false);
// "" when scaled_error(got, want) <= tol, else "<what>: scaled error ... > tol ...".
std::string compare_scaled(const std::string& what, const Tensor& got, const Tensor& want,
                           double tol, bool nan_matches_nan = false);
// Machine epsilon of a floating dtype (f32 or f64).
double dtype_eps(DType dtype);

// ---- the harness ----------------------------------------------------------------------------

class VariantHarness {
 public:
  // Runs the variants of `table` on `device`; each (other than `ref`) must run at least
  // `minimum` problems by finish().
  VariantHarness(const VariantTableBase& table, DeviceType device, int minimum)
      : op_(table.op()), device_(device), tally_(table, minimum, device) {}
  VariantHarness(const VariantHarness&) = delete;
  VariantHarness& operator=(const VariantHarness&) = delete;

  // Every variant of the harness's device on `problem`: declined ones are tallied with their
  // reason (which must not be empty; `ref` must not decline); each supporting one runs
  // `check(variant)` while forced by name (so checks that go through the ops reach it too), and a
  // non-empty answer or an exception fails the test. `label` says how the test built the problem
  // (shown with problem.repr()).
  template <typename Problem, typename Args>
  void run(const VariantTable<Problem, Args>& table, const Problem& problem,
           const std::string& label,
           const std::function<std::string(const typename VariantTable<Problem, Args>::Variant&)>&
               check) {
    run(table, std::vector<std::pair<std::string, Problem>>{{"", problem}}, label, check);
  }

  // The same for a sequence of passes that one check runs together (e.g. a training forward and
  // its backward): a variant runs only when it supports every pass; a declining pass's name
  // prefixes the reason. The repro is the first pass's.
  template <typename Problem, typename Args>
  void run(const VariantTable<Problem, Args>& table,
           const std::vector<std::pair<std::string, Problem>>& passes, const std::string& label,
           const std::function<std::string(const typename VariantTable<Problem, Args>::Variant&)>&
               check) {
    REQUIRE_FALSE(passes.empty());
    std::vector<std::pair<std::string, std::vector<Candidate>>> answers;
    answers.reserve(passes.size());
    for (const auto& [pass, problem] : passes)
      answers.emplace_back(pass, table.candidates(problem));
    const auto variants = table.variants();
    run_answers(table.list(), answers, passes.front().second.repr(), label,
                [&](std::size_t i) { return check(variants[i]); });
  }

  // One problem of an op driver (harness/op_driver.h): `check(name)` runs the named variant.
  void run(const harness::OpDriver& driver, const OpProblem& problem, const std::string& label,
           const std::function<std::string(const std::string&)>& check);

  // Where `ref` is the oracle the check compares with, running it against itself adds nothing
  // but time: the harness then only checks that ref supports every problem.
  void skip_ref() { run_ref_ = false; }

  // Every variant of the device must run every problem offered (no declines): the minimum
  // becomes the number of run() calls at finish().
  void require_all() { require_all_ = true; }

  // Prints the tally and fails for every variant under the minimum; returns how many were.
  int finish() {
    if (require_all_) tally_.set_minimum(problems_);
    return tally_.check();
  }
  // Problems a variant ran so far.
  int ran(const std::string& variant) const;
  VariantTally& tally() { return tally_; }

 private:
  // The loop of run(): `answers` holds each pass's candidates in the order of `variants`;
  // check(i) runs variants[i].
  void run_answers(const std::vector<VariantTableBase::Info>& variants,
                   const std::vector<std::pair<std::string, std::vector<Candidate>>>& answers,
                   const std::string& repr, const std::string& label,
                   const std::function<std::string(std::size_t)>& check);
  std::string describe(const std::string& variant, const std::string& repr,
                       const std::string& label) const;

  std::string op_;
  DeviceType device_;
  VariantTally tally_;
  bool run_ref_ = true;
  bool require_all_ = false;
  int problems_ = 0;  // run() calls
};

}  // namespace anvil::test
