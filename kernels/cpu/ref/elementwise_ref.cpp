// SPDX-License-Identifier: Apache-2.0
// Elementwise `ref`: one serial loop over the N-d index space, any strides, all dtypes (bf16/f16
// computed in f32, Note [Elementwise in 16-bit storage]).
#include "engine/core/strided_loop.h"
#include "kernels/cpu/elementwise_functors.h"
#include "kernels/cpu/ref/ref_kernels.h"

namespace anvil::kernels {
namespace {

template <typename T>
void run_ref(const ElementwiseArgs& args) {
  const auto L = ew_layout(args);
  T* out = static_cast<T*>(args.out.data);
  const T* a = static_cast<const T*>(args.a.data);
  const T* b = args.b.data ? static_cast<const T*>(args.b.data) : a;
  using C = ComputeType<T>;
  const C s = static_cast<C>(args.scalar), alpha = static_cast<C>(args.alpha);
  with_ew_storage_functor<T>(args.problem.op, [&](auto f) {
    for (std::int64_t r = 0; r < L.outer_count(); ++r) {
      const auto off = L.outer_offsets(r);
      for (std::int64_t i = 0; i < L.inner_size(); ++i)
        out[off[0] + i * L.inner_stride(0)] =
            f(a[off[1] + i * L.inner_stride(1)], b[off[2] + i * L.inner_stride(2)], s, alpha);
    }
  });
}

// The kernel for the problem's dtype (all six).
void run_any(const ElementwiseArgs& a) {
  visit_all_dtypes(a.problem.dtype, [&](auto t) { run_ref<decltype(t)>(a); });
}

}  // namespace

void register_elementwise_ref() {
  elementwise_table().add(
      {.name = "ref", .fn = run_any, .description = "serial strided loop (reference)"});
}

}  // namespace anvil::kernels
