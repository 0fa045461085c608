// SPDX-License-Identifier: Apache-2.0
// `test.broken`: a GEMM variant that is wrong on purpose, registered only with
// --anvil_test_broken_variant=on. It computes the right product with `ref` and then adds 1 to
// every element of C (validation samples elements, and 1 is far above its tolerance for the
// benchmark shapes), so every benchmark of it must fail validation against `ref` and be reported
// with SkipWithError, never timed (tests/bench/test_bench_suite.py checks this).
#include <utility>

#include "bench/registrations.h"
#include "anvil/anvil.h"
#include "engine/dispatch/gemm_problem.h"

namespace anvil::bench {

void register_test_variants() {
  register_builtin_kernels();
  const auto* ref = gemm_table().find("ref");
  ANVIL_CHECK(ref != nullptr, "register_test_variants", "the gemm table has no ref variant");
  GemmTable::Variant broken{
      .name = "test.broken",
      .device = DeviceType::cpu,
      .supports = ref->supports,
      .fn =
          [fn = ref->fn](const GemmArgs& a) {
            fn(a);
            const GemmProblem& p = a.problem;
            for (std::int64_t batch = 0; batch < p.batch; ++batch)
              for (std::int64_t i = 0; i < p.m; ++i)
                for (std::int64_t j = 0; j < p.n; ++j) {
                  const std::int64_t at = batch * p.stride_c + i * p.ldc + j;
                  if (p.dtype == DType::f32)
                    static_cast<float*>(a.c)[at] += 1.0f;
                  else
                    static_cast<double*>(a.c)[at] += 1.0;
                }
          },
      .description = "ref, then C + 1: wrong on purpose, to test that validation skips it",
  };
  // The order list (kernels/variant_order.cpp) does not name a test variant: it is placed
  // explicitly, last before `ref`, so it is never chosen by default, only by name.
  gemm_table().add(VariantPlace::last(), std::move(broken));
}

}  // namespace anvil::bench
