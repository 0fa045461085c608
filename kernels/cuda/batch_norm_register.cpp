// SPDX-License-Identifier: Apache-2.0
// Registration of the CUDA batch-norm variants in the batch_norm2d table:
//   cuda.cudnn  (batch_norm_cudnn.cpp): cuDNN's CUDNN_BATCHNORM_SPATIAL functions (default);
//   cuda.custom (batch_norm_kernels.cu): own kernels, every pass and mode.
// Both fill the table's Args exactly as ref does: forward_training writes the batch mean and
// the biased batch variance into mean/var; the engine updates the running statistics
// (engine/ops/batch_norm.cpp). Dense NCHW on the problem's device, on its anvil stream.
#include "engine/core/tensor.h"
#include "engine/dispatch/batch_norm_problem.h"
#include "kernels/cuda/batch_norm_kernels.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_guard.h"
#include "kernels/cuda/pool_bn_plan.h"
#include "kernels/cuda/register.h"

namespace anvil::cuda {

void run_batch_norm_cudnn(const BatchNormArgs& a);  // batch_norm_cudnn.cpp

namespace {

void run_batch_norm_custom(const BatchNormArgs& a) {
  const BatchNormProblem& p = a.problem;
  if (p.numel() == 0) return;
  const BnGeometry g{p.n, p.c, p.h * p.w, p.eps};
  const int device = p.device.index;
  // Scratch from the caching allocator, freed when this returns: safe, as everything on the
  // device runs on its one stream (Note [CUDA block cache]).
  Tensor scratch;
  if (p.pass == BatchNormPass::backward) scratch = Tensor::empty({2 * p.c}, DType::f64, p.device);
  cudaStream_t s = stream(device);
  DeviceGuard guard(device);
  switch (p.pass) {
    case BatchNormPass::forward_training:
      bn_stats(s, p.dtype, g, a.x, a.mean, a.var);
      [[fallthrough]];
    case BatchNormPass::forward_inference:
      bn_normalize(s, p.dtype, g, a.x, a.y, a.weight, a.bias, a.mean, a.var);
      return;
    case BatchNormPass::backward:
      bn_backward(s, p.dtype, g, a.x, a.dy, a.weight, a.mean, a.var, a.dx, a.dweight, a.dbias,
                  static_cast<double*>(scratch.data_ptr()), p.batch_stats);
      return;
  }
}

}  // namespace

void register_cuda_batch_norm() {
  batch_norm2d_table().add({
      .name = "cuda.cudnn",
      .device = DeviceType::cuda,
      .supports = cudnn_batch_norm_support,
      .fn = run_batch_norm_cudnn,
      .description = "cuDNN CUDNN_BATCHNORM_SPATIAL forward training/inference and backward "
                     "(eval-mode backward declined), f32/f64",
  });
  batch_norm2d_table().add({
      .name = "cuda.custom",
      .device = DeviceType::cuda,
      .supports = custom_batch_norm_support,
      .fn = run_batch_norm_custom,
      .description = "block per channel (statistics, gradient sums in double), block per plane "
                     "(normalise, dx), f32/f64",
  });
}

}  // namespace anvil::cuda
