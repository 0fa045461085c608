// SPDX-License-Identifier: Apache-2.0
// GEMM `ref`: the obviously correct triple loop, f32, f64, bf16 and f16, all four transpose
// modes, batched. Accumulates in double so it can serve as the reference for every other variant;
// bf16/f16 operands are widened exactly and the output rounded once (RNE), so a 16-bit GEMM here
// is the exact product rounded to the output type (Note [Autocast policy]).
// Row-major operands as described in engine/dispatch/gemm_problem.h.
#include "kernels/cpu/ref/ref_kernels.h"

#include "engine/core/half_types.h"
#include "engine/dispatch/floating_variant.h"
#include "engine/dispatch/gemm_problem.h"

namespace anvil::kernels {
namespace {

template <typename T>
void gemm_ref_typed(const GemmArgs& args) {
  const GemmProblem& p = args.problem;
  const T* A = static_cast<const T*>(args.a);
  const T* B = static_cast<const T*>(args.b);
  T* C = static_cast<T*>(args.c);
  // Element (i, l) of op(A) and (l, j) of op(B).
  auto a_at = [&](const T* a, std::int64_t i, std::int64_t l) {
    return p.trans_a ? a[l * p.lda + i] : a[i * p.lda + l];
  };
  auto b_at = [&](const T* b, std::int64_t l, std::int64_t j) {
    return p.trans_b ? b[j * p.ldb + l] : b[l * p.ldb + j];
  };
  // Small problems run serially: a parallel region costs more than their work, and much more
  // when the cores are oversubscribed (tests run side by side), where every barrier can wait a
  // whole scheduler time slice.
  const double work = static_cast<double>(p.batch) * p.m * p.n * p.k;
#pragma omp parallel for collapse(2) schedule(static) if (work >= 262144.0)
  for (std::int64_t bi = 0; bi < p.batch; ++bi) {
    for (std::int64_t i = 0; i < p.m; ++i) {
      const T* a = A + bi * p.stride_a;
      const T* b = B + bi * p.stride_b;
      T* c = C + bi * p.stride_c + i * p.ldc;
      for (std::int64_t j = 0; j < p.n; ++j) {
        double acc = 0.0;
        for (std::int64_t l = 0; l < p.k; ++l)
          acc += static_cast<double>(a_at(a, i, l)) * static_cast<double>(b_at(b, l, j));
        const double old = p.beta_zero ? 0.0 : args.beta * static_cast<double>(c[j]);
        c[j] = static_cast<T>(args.alpha * acc + old);
      }
    }
  }
}

void run_gemm_ref(const GemmArgs& args) {
  switch (args.problem.dtype) {
    case DType::f32:
      return gemm_ref_typed<float>(args);
    case DType::f64:
      return gemm_ref_typed<double>(args);
    case DType::bf16:
      return gemm_ref_typed<BFloat16>(args);
    case DType::f16:
      return gemm_ref_typed<Float16>(args);
    case DType::i32:
    case DType::i64:
      break;
  }
  fail("gemm ref", "needs a floating dtype, got ", dtype_name(args.problem.dtype));
}

}  // namespace

void register_gemm_ref() {
  gemm_table().add(GemmTable::Variant{
      .name = "ref",
      .supports =
          [](const GemmProblem& p) {
            if (is_any_floating(p.dtype)) return Support::yes();
            return Support::no(
                detail::str_cat("needs a floating dtype, got ", dtype_name(p.dtype)));
          },
      .fn = run_gemm_ref,
      .description = "triple loop, double accumulation (reference); bf16/f16 widened, output "
                     "rounded once"});
}

}  // namespace anvil::kernels
