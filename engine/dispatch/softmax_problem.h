// SPDX-License-Identifier: Apache-2.0
#pragma once
// The softmax-family problem descriptor and its variant table: row-wise (last dim) softmax and
// log-softmax of x[rows, cols], their backward, and the fused softmax cross-entropy against
// class ids (forward: per-row loss and log-sum-exp; backward: scaled dlogits). All buffers
// are dense row-major; engine/ops/softmax.cpp arranges that.
//   softmax / log_softmax:            x -> out (y)
//   softmax_backward (log or not):    x = y, dy -> out (dx)
//   cross_entropy_forward:            x = logits, target -> out (loss [rows]), lse [rows]
//   cross_entropy_backward:           x = logits, target, lse, scale -> out (dx)
//   cross_entropy_forward_grad:       x = logits, target -> out (loss [rows]), lse [rows],
//                                     grad = softmax(x) - onehot(target) (unscaled dlogits,
//                                     may alias x), col_sums (optional) = sum over rows of grad
//                                     (Note [Linear cross-entropy], engine/autograd/
//                                     functions_linear_cross_entropy.cpp); CPU variants only
// Variants: cpu.omp (kernels/cpu/omp/softmax_omp.cpp), ref (kernels/cpu/ref/softmax_ref.cpp),
// cuda.custom.softmax (kernels/cuda/softmax_kernels.cu).
#include <cstdint>
#include <string>
#include <tuple>

#include "engine/core/device.h"
#include "engine/core/dtype.h"
#include "engine/dispatch/variant_table.h"

namespace anvil {

enum class SoftmaxOp : std::uint8_t {
  softmax,
  log_softmax,
  softmax_backward,
  log_softmax_backward,
  cross_entropy_forward,
  cross_entropy_backward,
  cross_entropy_forward_grad,
};
const char* softmax_op_name(SoftmaxOp op);
inline bool softmax_is_cross_entropy(SoftmaxOp op) {
  return op == SoftmaxOp::cross_entropy_forward || op == SoftmaxOp::cross_entropy_backward ||
         op == SoftmaxOp::cross_entropy_forward_grad;
}

struct SoftmaxProblem {
  SoftmaxOp op = SoftmaxOp::softmax;
  DType dtype = DType::f32;        // of x, dy, out, lse (f32 or f64)
  DType index_dtype = DType::i64;  // of target (cross-entropy only: i32 or i64)
  Device device = Device::cpu();
  std::int64_t rows = 0, cols = 0;

  DeviceType device_type() const { return device.type; }
  // Every member (Note [Problem fields], engine/dispatch/problem_fields.h).
  bool operator==(const SoftmaxProblem&) const = default;
  auto fields() const { return std::tie(op, dtype, index_dtype, device, rows, cols); }
  std::string key() const;
  std::string repr() const;
};

struct SoftmaxArgs {
  SoftmaxProblem problem;
  const void* x = nullptr;       // [rows, cols]: x, or y for the backward forms
  const void* dy = nullptr;      // [rows, cols] (softmax backward forms)
  const void* target = nullptr;  // [rows] class ids (cross-entropy)
  void* lse = nullptr;           // [rows] written by CE forward, read by CE backward
  void* out = nullptr;           // y / dx [rows, cols], or the per-row loss [rows]
  double scale = 1.0;            // CE backward: dx = scale * (softmax - onehot)
  // CE backward on a GPU, optional: a device scalar of the dtype that multiplies `scale` (the
  // incoming gradient, read on the device: Note [Host waits in a step]). Set only for CUDA
  // problems (engine/ops/softmax.cpp folds a host scalar into `scale` instead).
  const void* scale_device = nullptr;
  void* grad = nullptr;      // CE forward_grad: [rows, cols] softmax - onehot (may be x)
  void* col_sums = nullptr;  // CE forward_grad, optional: [cols] column sums of grad
};

using SoftmaxTable = VariantTable<SoftmaxProblem, SoftmaxArgs>;
SoftmaxTable& softmax_table();

// Support answer shared by the variants: f32/f64 values, i32/i64 class ids;
// cross_entropy_forward_grad on the CPU only.
Support softmax_basic_support(const SoftmaxProblem& p);

}  // namespace anvil
