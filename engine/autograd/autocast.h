// SPDX-License-Identifier: Apache-2.0
#pragma once
// Autocast: a scoped, per-thread precision policy (like torch.autocast) and the one table of
// which ops run in the low precision and which stay in FP32 (Note [Autocast policy]).
#include <string>
#include <string_view>

#include "engine/core/precision.h"
#include "engine/core/tensor.h"

namespace anvil {

// Note [Autocast policy]
// Inside an AutocastGuard{Precision::bf16} (or fp16) the ops of the *low-precision list* (the
// GEMMs: matmul, linear and conv2d (conv2d_relu too); the LSTM's GEMMs are still to be added)
// cast their floating inputs to bf16/f16 at the op boundary and output the low type, with FP32
// accumulation inside the kernel, as PyTorch's autocast ops do. The ops of the *FP32 list*
// (softmax, log_softmax, cross-entropy, batch_norm2d, the reductions sum/mean and the losses)
// cast 16-bit inputs up to f32 and output f32, so a bf16 activation never reaches an exp, a
// long sum or a batch statistic. PyTorch's CPU lists put conv and linear in the low list and
// keep the losses and the long reductions in f32; its batch norm takes a bf16 input but keeps
// its statistics in f32, which anvil's f32-only batch-norm kernels get by the cast up.
// Every other op runs in the type of its inputs, the pooling ops (max_pool2d, avg_pool2d,
// adaptive_avg_pool2d) among them, as PyTorch pools in bf16: max pooling selects (exact in any
// type) and the 16-bit pooling variants sum averages in f32 and round once (Note [oneDNN bf16
// pooling], Note [16-bit pooling via f32 planes]), so a bf16 conv output goes through the pool
// to the next conv with no widening before it and no narrowing after. On the GPU, whose pooling
// kernels are f32/f64 only, a 16-bit input under autocast is still pooled in f32
// (engine/autograd/functions_pool.cpp). The casts go through Tensor::to, so autograd
// records them and the backward of a cast is the cast back: a gradient reaches an f32 parameter in
// f32 (the master weights stay f32). The GEMM kernels accumulate in f32 or wider: until the fast
// bf16 kernels exist, `ref` takes bf16/f16 operands, accumulates in double and rounds the output
// once (kernels/cpu/ref). The optimizer is not an op here: it calls the kernels directly
// on f32 parameters and their f32 gradients, so autocast never reaches it. Guards nest; the
// innermost wins, and AutocastGuard{Precision::fp32} turns autocast off inside an outer one
// (torch.autocast(enabled=False)). tf32 is an fp32 policy: it casts nothing. The state is per
// thread, like grad mode: a worker thread starts with autocast off. With ANVIL_VERBOSE=dispatch
// each distinct decision prints one line (describe_autocast()).

// Which list an op belongs to.
enum class AutocastList : std::uint8_t { low_precision, fp32, unlisted };

struct AutocastOp {
  std::string_view op;
  AutocastList list;
};

// The table: every op autocast knows, with its list (Note [Autocast policy]).
inline constexpr AutocastOp kAutocastOps[] = {
    {"matmul", AutocastList::low_precision},
    {"linear", AutocastList::low_precision},
    {"conv2d", AutocastList::low_precision},
    {"softmax", AutocastList::fp32},
    {"log_softmax", AutocastList::fp32},
    {"cross_entropy", AutocastList::fp32},
    {"linear_cross_entropy", AutocastList::fp32},
    {"binary_cross_entropy_with_logits", AutocastList::fp32},
    {"sum", AutocastList::fp32},
    {"mean", AutocastList::fp32},
    {"batch_norm2d", AutocastList::fp32},
};

std::string_view autocast_list_name(AutocastList list);
// The list `op` is in; unlisted when the table does not name it.
AutocastList autocast_list_of(std::string_view op);

// The precision in force on this thread (fp32 when no guard is active).
Precision autocast_precision();
// True inside a bf16 or fp16 guard.
bool autocast_enabled();

class AutocastGuard {
 public:
  explicit AutocastGuard(Precision precision);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  Precision previous_;
};

// The dtype an input of type `input` to `op` is cast to under `precision` (pure: no state).
// Non-floating inputs (labels, ids) and unlisted ops keep their type.
DType autocast_dtype(std::string_view op, DType input, Precision precision);

// The dispatch-log line for one decision, e.g.
//   anvil autocast: op=linear list=low_precision precision=bf16 input=f32 runs=bf16
std::string describe_autocast(std::string_view op, DType input, Precision precision);

// `x` cast for `op` under this thread's policy (through Tensor::to, so differentiable); `x`
// itself when nothing changes. Logs the decision when ANVIL_VERBOSE=dispatch.
Tensor autocast_input(std::string_view op, const Tensor& x);

}  // namespace anvil
