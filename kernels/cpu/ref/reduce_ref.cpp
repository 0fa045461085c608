// SPDX-License-Identifier: Apache-2.0
// Reduce `ref`: serial loops over x[outer, reduce, inner] (engine/dispatch/reduce_problem.h),
// f32/f64; sums accumulate in double, max keeps the first maximum and the first NaN.
#include <cmath>
#include <cstdint>
#include <limits>

#include "engine/dispatch/floating_variant.h"
#include "engine/dispatch/reduce_problem.h"
#include "kernels/cpu/ref/ref_kernels.h"

namespace anvil::kernels {
namespace {

template <typename T>
void run_ref(const ReduceArgs& a) {
  const auto& p = a.problem;
  const T* x = static_cast<const T*>(a.x);
  T* out = static_cast<T*>(a.out);
  for (std::int64_t o = 0; o < p.outer; ++o) {
    for (std::int64_t i = 0; i < p.inner; ++i) {
      const T* col = x + o * p.reduce * p.inner + i;  // element r at col[r * inner]
      if (p.op == ReduceOp::sum) {
        double acc = 0.0;
        for (std::int64_t r = 0; r < p.reduce; ++r) acc += static_cast<double>(col[r * p.inner]);
        out[o * p.inner + i] = static_cast<T>(acc * a.scale);
      } else {
        T best = col[0];
        std::int64_t arg = 0;
        for (std::int64_t r = 1; r < p.reduce && !std::isnan(best); ++r) {
          const T v = col[r * p.inner];
          if (v > best || std::isnan(v)) {
            best = v;
            arg = r;
          }
        }
        out[o * p.inner + i] = best;
        a.index[o * p.inner + i] = arg;
      }
    }
  }
}

}  // namespace

void register_reduce_ref() {
  reduce_table().add({
      .name = "ref",
      .supports = reduce_basic_support,
      .fn = floating_fn(run_ref<float>, run_ref<double>),
      .description = "serial loops (reference)",
  });
}

}  // namespace anvil::kernels
