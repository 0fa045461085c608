// SPDX-License-Identifier: Apache-2.0
// Registration of the CUDA training family: the fused multi-tensor optimizer updates
// (cuda.custom.sgd, cuda.custom.adam), gradient-norm clipping (cuda.custom.grad_norm,
// cuda.custom.grad_scale) and dropout (cuda.custom.dropout). Each adapter takes the table's
// Args (engine/dispatch/optimizer_problem.h, dropout_problem.h), allocates device scratch through
// the engine's caching allocator and calls a C++17 launcher on the device's anvil stream.
#include <vector>

#include "engine/core/random.h"
#include "engine/core/tensor.h"
#include "engine/dispatch/dropout_problem.h"
#include "engine/dispatch/optimizer_problem.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_guard.h"
#include "kernels/cuda/dropout_kernels.h"
#include "kernels/cuda/optimizer_kernels.h"
#include "kernels/cuda/register.h"

namespace anvil::cuda {
namespace {

Support floating_only(DType dtype) {
  if (dtype == DType::f32 || dtype == DType::f64) return Support::yes();
  return Support::no(detail::str_cat("needs f32 or f64, got ", dtype_name(dtype)));
}

// The list as the launchers take it, without empty tensors (they have no chunks anyway).
std::vector<MultiTensorEntry> entries_of(const OptimizerArgs& a) {
  std::vector<MultiTensorEntry> out;
  out.reserve(static_cast<std::size_t>(a.problem.tensors));
  for (std::int64_t k = 0; k < a.problem.tensors; ++k) {
    const OptimTensor& t = a.tensors[k];
    if (t.numel == 0) continue;
    out.push_back(t);
  }
  return out;
}

// Runs `launch(stream, entries, count, scratch)` on the problem's device. The scratch tensor is
// freed when this returns; the caching allocator may hand its block to the next allocation at
// once, which is safe because everything on the device runs on this one stream
// (Note [CUDA block cache]).
template <typename Launch>
void with_list(const OptimizerArgs& a, const char* where, Launch&& launch) {
  const std::vector<MultiTensorEntry> entries = entries_of(a);
  if (entries.empty()) return;
  ANVIL_CHECK(entries.size() < (1u << 30), where, "too many tensors: ", entries.size());
  const int count = static_cast<int>(entries.size());
  const int device = a.problem.device.index;
  const std::size_t bytes = multi_tensor_scratch_bytes(count);
  const auto words =
      static_cast<std::int64_t>((bytes + sizeof(std::int64_t) - 1) / sizeof(std::int64_t));
  Tensor scratch = Tensor::empty({words}, DType::i64, a.problem.device);
  cudaStream_t s = stream(device);
  DeviceGuard guard(device);
  launch(s, entries.data(), count, scratch.data_ptr());
}

void sgd(const OptimizerArgs& a) {
  const SgdParams p{a.sgd.lr, a.sgd.momentum, a.sgd.dampening, a.sgd.weight_decay, a.sgd.nesterov};
  with_list(a, "cuda.custom.sgd",
            [&](cudaStream_t s, const MultiTensorEntry* e, int n, void* scratch) {
              multi_tensor_sgd(s, a.problem.dtype, e, n, scratch, p);
            });
}

void adam(const OptimizerArgs& a) {
  const AdamParams p{a.adam.lr,           a.adam.beta1, a.adam.beta2, a.adam.eps,
                     a.adam.weight_decay, a.adam.c1,    a.adam.c2,    a.problem.decoupled_decay};
  with_list(a, "cuda.custom.adam",
            [&](cudaStream_t s, const MultiTensorEntry* e, int n, void* scratch) {
              multi_tensor_adam(s, a.problem.dtype, e, n, scratch, p);
            });
}

void grad_norm(const OptimizerArgs& a) {
  if (a.sum_device != nullptr) {  // clip_grad_norm_async_: stays on the device, no host result
    with_list(a, "cuda.custom.grad_norm",
              [&](cudaStream_t s, const MultiTensorEntry* e, int n, void* scratch) {
                multi_tensor_sum_squares_into(s, a.problem.dtype, e, n, scratch,
                                              static_cast<double*>(a.sum_device));
              });
    return;
  }
  ANVIL_CHECK(a.result != nullptr, "cuda.custom.grad_norm", "no result pointer");
  *a.result = 0.0;
  with_list(a, "cuda.custom.grad_norm",
            [&](cudaStream_t s, const MultiTensorEntry* e, int n, void* scratch) {
              *a.result = multi_tensor_sum_squares(s, a.problem.dtype, e, n, scratch);
            });
}

void grad_scale(const OptimizerArgs& a) {
  if (a.clip_sum != nullptr) {  // clip_grad_norm_async_: factor read on the device
    with_list(a, "cuda.custom.grad_scale",
              [&](cudaStream_t s, const MultiTensorEntry* e, int n, void* scratch) {
                multi_tensor_clip(s, a.problem.dtype, e, n, scratch,
                                  static_cast<const double*>(a.clip_sum), a.clip_max_norm);
              });
    return;
  }
  if (a.found_inf != nullptr) {  // optim::unscale_grads_: the flag stays on the device
    with_list(a, "cuda.custom.grad_scale",
              [&](cudaStream_t s, const MultiTensorEntry* e, int n, void* scratch) {
                multi_tensor_scale_check(s, a.problem.dtype, e, n, scratch, a.scale,
                                         static_cast<float*>(a.found_inf));
              });
    return;
  }
  with_list(a, "cuda.custom.grad_scale",
            [&](cudaStream_t s, const MultiTensorEntry* e, int n, void* scratch) {
              multi_tensor_scale(s, a.problem.dtype, e, n, scratch, a.scale);
            });
}

void dropout(const DropoutArgs& a) {
  const DropoutProblem& p = a.problem;
  ANVIL_CHECK(a.gen != nullptr, "cuda.custom.dropout", "no generator");
  // One draw per call, whatever the size, as the host `ref` variant (Note [Dropout counter RNG]).
  const std::uint64_t seed = a.gen->next();
  const std::uint64_t threshold = dropout_keep_threshold(p.p);
  if (p.numel == 0) return;
  const int device = p.device.index;
  cudaStream_t s = stream(device);
  DeviceGuard guard(device);
  dropout_forward(s, p.dtype, a.x, a.y, a.mask, p.numel, seed, /*offset=*/0, threshold,
                  1.0 / (1.0 - p.p));
}

}  // namespace

void register_cuda_training() {
  const auto opt_support = [](const OptimizerProblem& p) { return floating_only(p.dtype); };
  sgd_update_table().add({.name = "cuda.custom.sgd",
                          .device = DeviceType::cuda,
                          .supports = opt_support,
                          .fn = sgd,
                          .description = "fused SGD over all parameters, one launch"});
  adam_update_table().add({.name = "cuda.custom.adam",
                           .device = DeviceType::cuda,
                           .supports = opt_support,
                           .fn = adam,
                           .description = "fused Adam over all parameters, one launch"});
  grad_norm_table().add(
      {.name = "cuda.custom.grad_norm",
       .device = DeviceType::cuda,
       .supports = opt_support,
       .fn = grad_norm,
       .description = "sum of squares of all gradients, two-pass, read back once"});
  grad_scale_table().add({.name = "cuda.custom.grad_scale",
                          .device = DeviceType::cuda,
                          .supports = opt_support,
                          .fn = grad_scale,
                          .description = "scales all gradients in one launch"});
  dropout_table().add(
      {.name = "cuda.custom.dropout",
       .device = DeviceType::cuda,
       .supports = [](const DropoutProblem& p) { return floating_only(p.dtype); },
       .fn = dropout,
       .description = "Philox4x32-10 mask (the stream of ref), y and mask in one pass"});
}

}  // namespace anvil::cuda
