// SPDX-License-Identifier: Apache-2.0
#pragma once
// The (value, id) type pair of the kernels that read class or embedding ids (embedding on the
// CPU and the GPU, the CUDA cross-entropy): f32 or f64 values with i32 or i64 ids. One helper
// for every such kernel, so that each file does not spell out the four combinations again.
#include "engine/core/dtype.h"

namespace anvil::kernels {

// Calls fn(T{}, I{}) with T = float or double for `value` and I = std::int32_t or std::int64_t
// for `index`; throws naming the dtype for any other (the variants' supports() refused them).
template <typename Fn>
void visit_value_and_index(DType value, DType index, Fn&& fn) {
  visit_floating(value, [&](auto t) { visit_integer(index, [&](auto i) { fn(t, i); }); });
}

}  // namespace anvil::kernels
