// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers for the many variants whose kernel is written once as a template over the element type
// and computes in f32 and f64 only: their supports() answer and their dtype dispatch, so that a
// registration says `.fn = floating_fn(run<float>, run<double>)` instead of repeating the branch.
#include <functional>

#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/dispatch/selection.h"

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

}  // namespace anvil
