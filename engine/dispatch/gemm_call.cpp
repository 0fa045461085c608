// SPDX-License-Identifier: Apache-2.0
// GemmCall (engine/dispatch/gemm_call.h): selection with autotune trials on a scratch C, then the
// run. The rule is Note [GEMM through the table].
#include "engine/dispatch/gemm_call.h"

#include "engine/core/error.h"
#include "engine/core/tensor.h"
#include "engine/dispatch/trial_timer.h"

namespace anvil {

namespace {

// C = beta C for an empty sum (K = 0) on the host: no variant is asked to compute it.
template <typename T>
void scale_c(const GemmProblem& p, void* c, double beta) {
  for (std::int64_t bi = 0; bi < p.batch; ++bi)
    for (std::int64_t i = 0; i < p.m; ++i) {
      T* row = static_cast<T*>(c) + bi * p.stride_c + i * p.ldc;
      for (std::int64_t j = 0; j < p.n; ++j)
        row[j] = p.beta_zero ? T(0) : static_cast<T>(beta * static_cast<double>(row[j]));
    }
}

}  // namespace

void GemmCall::run(const void* a, const void* b, void* c, double alpha, double beta) {
  if (p_.m == 0 || p_.n == 0) return;
  if (p_.k == 0) {
    ANVIL_CHECK(p_.device.is_cpu() && (p_.dtype == DType::f32 || p_.dtype == DType::f64), "gemm",
                "empty sum (K = 0) of a host f32/f64 GEMM only, got ", p_.repr());
    if (p_.dtype == DType::f32)
      scale_c<float>(p_, c, beta);
    else
      scale_c<double>(p_, c, beta);
    return;
  }
  const GemmArgs args{p_, a, b, c, alpha, p_.beta_zero ? 0.0 : beta};
  if (!variant_) {
    auto trial = [&args](const GemmTable::Variant& v) {
      GemmArgs t = args;
      Tensor scratch;
      if (!args.problem.beta_zero) {
        const GemmProblem& p = args.problem;
        scratch = Tensor::zeros({p.batch, p.m, p.n}, p.dtype, p.device);
        t.c = scratch.data_ptr();
        t.problem.ldc = p.n;
        t.problem.stride_c = p.m * p.n;
      }
      return time_trial(
          args.problem.device, [&] { v.fn(t); }, "gemm autotune");
    };
    variant_ = &gemm_table().select(p_, trial);
  }
  variant_->fn(args);
}

void run_gemm(const GemmArgs& args) {
  GemmCall(args.problem).run(args.a, args.b, args.c, args.alpha, args.beta);
}

}  // namespace anvil
