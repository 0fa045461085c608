// SPDX-License-Identifier: Apache-2.0
#pragma once
// Problem descriptors and variant tables of the optimizer family: the SGD and Adam updates, the
// global sum of squares of gradient-norm clipping and the scaling that clips. Each call covers a
// LIST of tensors of one device and dtype (multi-tensor), so that a GPU variant updates every
// parameter of a model in one or a few launches instead of one per tensor.
//   sgd_update   p -= lr * step(g)                (torch.optim.SGD semantics, optional momentum)
//   adam_update  m, v blended, p -= lr/c1 * m / (sqrt(v/c2) + eps)   (torch.optim.Adam, L2 decay;
//                with decoupled_decay, torch.optim.AdamW: p *= 1 - lr*wd first, no L2 term)
//   grad_norm    *result = sum over tensors and elements of g^2, accumulated in double
//   grad_scale   g *= scale, in place; with found_inf, also flags a non-finite result (loss
//                scaling's unscale-and-check pass, Note [Dynamic loss scaling])
// Variants: cpu.omp (the fused OpenMP kernels, one parallel pass per tensor), ref (serial loops);
// cuda.custom.sgd / .adam / .grad_norm / .grad_scale in libanvil_cuda. Tensors are dense.
#include <cstdint>
#include <string>
#include <tuple>

#include "engine/core/device.h"
#include "engine/core/dtype.h"
#include "engine/dispatch/optim_tensor.h"
#include "engine/dispatch/variant_table.h"

namespace anvil {

enum class OptimOp : std::uint8_t { sgd, adam, grad_norm, grad_scale };
const char* optim_op_name(OptimOp op);

struct OptimizerProblem {
  OptimOp op = OptimOp::sgd;
  DType dtype = DType::f32;
  Device device = Device::cpu();
  std::int64_t tensors = 0;  // number of tensors in the list
  std::int64_t numel = 0;    // elements over all of them
  bool momentum = false;     // sgd: a momentum buffer is read and written
  // adam: AdamW's decoupled weight decay (Note [Decoupled weight decay] in adam.cpp):
  // p *= 1 - lr * weight_decay before the update, and no L2 term in the gradient.
  bool decoupled_decay = false;

  DeviceType device_type() const { return device.type; }
  // Every member (Note [Problem fields], engine/dispatch/problem_fields.h).
  bool operator==(const OptimizerProblem&) const = default;
  auto fields() const {
    return std::tie(op, dtype, device, tensors, numel, momentum, decoupled_decay);
  }
  std::string key() const;
  std::string repr() const;
  // Bytes read and written by one call (the roofline of a memory-bound update).
  double bytes() const;
};

struct SgdHyper {
  double lr = 0.01, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
};

// c1 = 1 - beta1^t, c2 = 1 - beta2^t: the bias corrections of step t. weight_decay is L2 or
// decoupled as OptimizerProblem::decoupled_decay says.
struct AdamHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0, c1 = 1.0, c2 = 1.0;
};

struct OptimizerArgs {
  OptimizerProblem problem;
  const OptimTensor* tensors = nullptr;  // problem.tensors entries
  SgdHyper sgd;
  AdamHyper adam;
  double scale = 1.0;        // grad_scale
  double* result = nullptr;  // grad_norm: host double receiving the sum of squares
  // Clipping without leaving the device (optim::clip_grad_norm_async_; CUDA variants only, the
  // engine sets these for CUDA problems alone):
  //   grad_norm:  when sum_device is set, the sum of squares is ADDED to that device f64 scalar
  //               and `result` is not written (no readback);
  //   grad_scale: when clip_sum is set (a device f64 scalar holding a sum of squares), the
  //               scale is min(1, clip_max_norm / (sqrt(*clip_sum) + 1e-6)), read on the device.
  void* sum_device = nullptr;
  const void* clip_sum = nullptr;
  double clip_max_norm = 0.0;
  // grad_scale (optim::unscale_grads_, every variant): when set, an f32 flag on the problem's
  // device that is set to 1 when any scaled gradient is inf or NaN, and never cleared, so that
  // several calls share one flag. Written without a host wait.
  void* found_inf = nullptr;
};

using OptimizerTable = VariantTable<OptimizerProblem, OptimizerArgs>;
OptimizerTable& sgd_update_table();   // op "sgd_update"
OptimizerTable& adam_update_table();  // op "adam_update"
OptimizerTable& grad_norm_table();    // op "grad_norm"
OptimizerTable& grad_scale_table();   // op "grad_scale"
// The table of `op`.
OptimizerTable& optimizer_table(OptimOp op);

}  // namespace anvil
