// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers for the many variants whose kernel is written once as a template over the element type
// and computes in f32 and f64 only: their supports() answer and their dtype dispatch, so that a
// registration says `table.add(floating_variant("ref", run<float>, run<double>, "what it does"))`
// (or `.fn = floating_fn(run<float>, run<double>)` beside other fields) instead of repeating
// the branch in every kernel file.
#include <functional>
#include <string>
#include <utility>

#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/dispatch/selection.h"
#include "engine/dispatch/variant_table.h"

namespace anvil {

// Yes for f32 and f64; otherwise "needs f32 or f64, got i32".
inline Support floating_support(DType t) {
  if (is_floating(t)) return Support::yes();
  return Support::no(detail::str_cat("needs f32 or f64, got ", dtype_name(t)));
}

// The variant function (VariantTable::Fn) that runs `f64` on f64 problems and `f32` on f32 ones
// (Args has a `problem` with a `dtype`); other dtypes throw, as supports() declined them.
template <typename Args>
std::function<void(const Args&)> floating_fn(void (*f32)(const Args&), void (*f64)(const Args&)) {
  return [f32, f64](const Args& a) {
    const DType t = a.problem.dtype;
    ANVIL_CHECK(is_floating(t), "floating_fn", "expected f32 or f64, got ", dtype_name(t));
    (t == DType::f64 ? f64 : f32)(a);
  };
}

// A variant (for VariantTable<Problem, Args>::add) that supports f32 and f64 problems and runs
// `fn`, which handles both: a CPU variant, not opt-in.
template <typename Args>
auto floating_variant(const std::string& name, std::function<void(const Args&)> fn,
                      const std::string& description) {
  using Problem = decltype(Args::problem);
  return typename VariantTable<Problem, Args>::Variant{
      .name = name,
      .supports = [](const Problem& p) { return floating_support(p.dtype); },
      .fn = std::move(fn),
      .description = description};
}
// The same for a kernel with one function per element type.
template <typename Args>
auto floating_variant(const std::string& name, void (*f32)(const Args&), void (*f64)(const Args&),
                      const std::string& description) {
  return floating_variant<Args>(name, floating_fn(f32, f64), description);
}

}  // namespace anvil
