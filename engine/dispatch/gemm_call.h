// SPDX-License-Identifier: Apache-2.0
#pragma once
// GemmCall: one GEMM run through the gemm table, with the one autotune rule that every caller
// (ops::gemm, the cpu.im2col and cuda.custom.im2col convolutions, the cpu.fused, ref and
// cuda.custom LSTM kernels) shares.
#include "engine/dispatch/gemm_problem.h"

namespace anvil {

// Note [GEMM through the table]
// A GEMM that an op or a kernel runs goes through GemmCall, whose rule is:
//  * the variant is the table's selection for the problem (Note [Variant selection]: forced,
//    autotuned, heuristic, priority), made at the first run() and reused by later runs of the
//    same GemmCall (a per-step recurrent GEMM repeated T times selects once);
//  * with autotune on and no winner cached for the problem's key, every supporting variant is
//    timed on the call's own A and B. When C is read (beta_zero false) the trials write a
//    dense scratch C of zeros instead, so C is updated exactly once, by the selected variant:
//    a call's result is the selected variant's result whether autotune ran or not;
//  * a CUDA variant only enqueues work, so its trials are timed on its device's stream;
//  * m == 0 or n == 0 does nothing; an empty sum (k == 0) sets C = beta C (0 when beta_zero)
//    without asking any variant (host f32/f64 only; ops::gemm handles other devices itself).
class GemmCall {
 public:
  explicit GemmCall(const GemmProblem& p) : p_(p) {}
  // C = alpha op(A) op(B) + beta C; beta is taken as 0 when the problem says beta_zero.
  void run(const void* a, const void* b, void* c, double alpha = 1.0, double beta = 1.0);
  const GemmProblem& problem() const { return p_; }

 private:
  GemmProblem p_;
  const GemmTable::Variant* variant_ = nullptr;  // selected at the first run()
};

// One GEMM, selected and run now: GemmCall(args.problem).run(args.a, args.b, args.c, ...).
void run_gemm(const GemmArgs& args);

}  // namespace anvil
