// SPDX-License-Identifier: Apache-2.0
// Registration of the CUDA pooling variants in the max_pool2d, avg_pool2d and
// adaptive_avg_pool2d tables:
//   cuda.custom (pool_kernels.cu): every kind and pass; the max workspace is ref's int32 index.
//   cuda.cudnn  (pool_cudnn.cpp):  what cuDNN's pooling can express (pool_bn_plan.h).
// Dense NCHW on the problem's device, run on its anvil stream under a DeviceGuard.
#include "engine/core/tensor.h"
#include "engine/dispatch/pool_problem.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_guard.h"
#include "kernels/cuda/pool_bn_plan.h"
#include "kernels/cuda/pool_geometry.h"
#include "kernels/cuda/pool_kernels.h"
#include "kernels/cuda/register.h"

namespace anvil::cuda {

void run_pool_cudnn(const PoolArgs& a);  // pool_cudnn.cpp

namespace {

void run_pool_custom(const PoolArgs& a) {
  const PoolProblem& p = a.problem;
  const int device = p.device.index;
  const PoolGeometry g = pool_geometry_of(p);
  if (p.pass == PoolPass::backward) {
    const std::int32_t* index = nullptr;
    if (p.kind == PoolKind::max) {
      ANVIL_CHECK(a.workspace != nullptr && a.workspace->defined() &&
                      a.workspace->dtype() == DType::i32 && a.workspace->numel() == p.out_numel() &&
                      a.workspace->device() == p.device,
                  "cuda.custom max_pool2d", "backward needs the int32 index workspace [", p.n, ",",
                  p.c, ",", p.oh, ",", p.ow, "] of its own forward on ", p.device.str());
      index = static_cast<const std::int32_t*>(a.workspace->data_ptr());
    }
    cudaStream_t s = stream(device);
    DeviceGuard guard(device);
    pool_backward(s, p.dtype, g, a.dy, a.dx, index);
    return;
  }
  std::int32_t* index = nullptr;
  if (p.kind == PoolKind::max && p.pass == PoolPass::forward_training) {
    ANVIL_CHECK(a.workspace != nullptr, "cuda.custom max_pool2d", "no workspace handle");
    *a.workspace = Tensor::empty({p.n, p.c, p.oh, p.ow}, DType::i32, p.device);
    index = static_cast<std::int32_t*>(a.workspace->data_ptr());  // device memory: not data<T>()
  }
  cudaStream_t s = stream(device);
  DeviceGuard guard(device);
  pool_forward(s, p.dtype, g, a.x, a.y, index);
}

}  // namespace

void register_cuda_pool() {
  for (PoolKind kind : {PoolKind::max, PoolKind::avg, PoolKind::adaptive_avg}) {
    pool_table(kind).add({
        .name = "cuda.custom",
        .device = DeviceType::cuda,
        .supports = custom_pool_support,
        .fn = run_pool_custom,
        .description = "thread per output (forward) / per input (gathering backward), ref's "
                       "index and rounding, f32/f64",
    });
    pool_table(kind).add({
        .name = "cuda.cudnn",
        .device = DeviceType::cuda,
        .supports = [](const PoolProblem& p) { return cudnn_pool_plan(p).support; },
        .fn = run_pool_cudnn,
        .description = "cudnnPoolingForward/Backward (max: inference only; no ceil-mode extra "
                       "window; uniform adaptive bins), f32/f64",
    });
  }
}

}  // namespace anvil::cuda
