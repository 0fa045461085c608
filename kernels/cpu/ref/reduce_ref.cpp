// SPDX-License-Identifier: Apache-2.0
// Reduce `ref`: serial loops over x[outer, reduce, inner] (engine/dispatch/reduce_problem.h),
// f32/f64/bf16/f16; sums accumulate in double, max keeps the first maximum and the first NaN.
// It is the only CPU variant for bf16/f16 so far (Note [Reductions of 16-bit tensors]).
#include <cmath>
#include <cstdint>
#include <limits>

#include "engine/dispatch/reduce_problem.h"
#include "kernels/cpu/ref/ref_kernels.h"

namespace anvil::kernels {
namespace {

// Note [Reductions of 16-bit tensors]
// bf16/f16 elements are widened as they are read: sum and mean accumulate in double here (in f32
// or wider in any later variant, never in 16 bits, where a long sum stalls once the total
// outgrows 2^8 (bf16) or 2^11 (f16) times its addends) and round once to the storage type; max
// compares in f32, where the widening is exact, so its value and index equal those of the f32
// copy of the input.
template <typename T>
void run_ref(const ReduceArgs& a) {
  using C = ComputeType<T>;  // float for bf16/f16, T otherwise
  const auto& p = a.problem;
  const T* x = static_cast<const T*>(a.x);
  T* out = static_cast<T*>(a.out);
  for (std::int64_t o = 0; o < p.outer; ++o) {
    for (std::int64_t i = 0; i < p.inner; ++i) {
      const T* col = x + o * p.reduce * p.inner + i;  // element r at col[r * inner]
      if (p.op == ReduceOp::sum) {
        double acc = 0.0;
        for (std::int64_t r = 0; r < p.reduce; ++r)
          acc += convert_element<double>(col[r * p.inner]);
        out[o * p.inner + i] = convert_element<T>(acc * a.scale);
      } else {
        C best = convert_element<C>(col[0]);
        std::int64_t arg = 0;
        for (std::int64_t r = 1; r < p.reduce && !std::isnan(best); ++r) {
          const C v = convert_element<C>(col[r * p.inner]);
          if (v > best || std::isnan(v)) {
            best = v;
            arg = r;
          }
        }
        out[o * p.inner + i] = convert_element<T>(best);
        a.index[o * p.inner + i] = arg;
      }
    }
  }
}

// f32/f64 as every variant, and bf16/f16 (Note [Reductions of 16-bit tensors]).
Support ref_support(const ReduceProblem& p) {
  ReduceProblem as_f32 = p;
  if (is_half(p.dtype)) as_f32.dtype = DType::f32;
  return reduce_basic_support(as_f32);
}

void run_any(const ReduceArgs& a) {
  switch (a.problem.dtype) {
    case DType::bf16:
      return run_ref<BFloat16>(a);
    case DType::f16:
      return run_ref<Float16>(a);
    case DType::f64:
      return run_ref<double>(a);
    case DType::f32:
      return run_ref<float>(a);
    default:
      fail("reduce ref", "expected f32, f64, bf16 or f16, got ", dtype_name(a.problem.dtype));
  }
}

}  // namespace

void register_reduce_ref() {
  reduce_table().add({
      .name = "ref",
      .supports = ref_support,
      .fn = run_any,
      .description = "serial loops (reference)",
  });
}

}  // namespace anvil::kernels
