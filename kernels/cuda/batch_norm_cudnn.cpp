// SPDX-License-Identifier: Apache-2.0
// `cuda.cudnn` batch norm: cudnnBatchNormalizationForwardTraining / ForwardInference / Backward
// in CUDNN_BATCHNORM_SPATIAL mode on packed NCHW f32/f64 tensors; the per-channel descriptor
// comes from cudnnDeriveBNTensorDescriptor (1xCx1x1, the data type of x); both descriptors are
// built once per (dtype, shape) and cached (Note [Stable cache entries],
// kernels/stable_cache.h). How the table's
// mean/var (batch mean, biased variance) are obtained from and given to cuDNN:
// Note [cuDNN batch norm] in pool_bn_plan.h.
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <tuple>

#include "engine/core/tensor.h"
#include "engine/dispatch/batch_norm_problem.h"
#include "engine/dispatch/problem_fields.h"
#include "kernels/cuda/batch_norm_kernels.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cudnn_handle.h"
#include "kernels/cuda/device_guard.h"
#include "kernels/cuda/pool_bn_cudnn_util.h"
#include "kernels/cuda/pool_bn_plan.h"
#include "kernels/stable_cache.h"

namespace anvil::cuda {
namespace {

// What the descriptors depend on: not the pass, momentum, eps or device (the descriptors are
// host objects).
struct BnDescKey {
  DType dtype = DType::f32;
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  bool operator==(const BnDescKey&) const = default;
  auto fields() const { return std::tie(dtype, n, c, h, w); }
};
// x (also y, dy, dx) and the per-channel 1xCx1x1 descriptor, set once and then only read.
struct BnDescs {
  TensorDesc x_desc, bn_desc;
  explicit BnDescs(const BnDescKey& k) {
    x_desc.set_nchw(cudnn_data_type(k.dtype), static_cast<int>(k.n), static_cast<int>(k.c),
                    static_cast<int>(k.h), static_cast<int>(k.w));
    ANVIL_CUDNN_CHECK(
        cudnnDeriveBNTensorDescriptor(bn_desc.get(), x_desc.get(), CUDNN_BATCHNORM_SPATIAL));
  }
};

const BnDescs& bn_descs(const BatchNormProblem& p) {
  static auto* cache = new kernels::StableCache<BnDescKey, BnDescs, ProblemHasher>();
  const BnDescKey key{p.dtype, p.n, p.c, p.h, p.w};
  if (const BnDescs* d = cache->find(key)) return *d;
  return *cache->insert(key, std::make_unique<const BnDescs>(key)).first;
}

}  // namespace

void run_batch_norm_cudnn(const BatchNormArgs& a) {
  const BatchNormProblem& p = a.problem;
  const Support s = cudnn_batch_norm_support(p);
  ANVIL_CHECK(s.ok, "cuda.cudnn batch_norm2d", "cannot run ", p.repr(), ": ", s.reason);
  if (p.numel() == 0) return;
  const int device = p.device.index;
  const std::size_t vec_bytes = static_cast<std::size_t>(p.c) * dtype_size(p.dtype);
  // 1 / sqrt(var + eps) for the backward, from the caching allocator (freed on return: safe, one
  // stream per device, Note [CUDA block cache]).
  Tensor invstd;
  if (p.pass == BatchNormPass::backward) invstd = Tensor::empty({p.c}, p.dtype, p.device);
  DeviceGuard guard(device);
  cudaStream_t st = stream(device);
  cudnnHandle_t h = cudnn_handle(device);  // bound to st
  const BnDescs& descs = bn_descs(p);
  const TensorDesc& x_desc = descs.x_desc;
  const TensorDesc& bn_desc = descs.bn_desc;
  const ScalingFactors one_zero(p.dtype);
  switch (p.pass) {
    case BatchNormPass::forward_training: {
      // Running outputs = the problem's mean/var, zeroed, factor 1: they receive the batch mean
      // and cuDNN's unbiased batch variance; then var *= (M - 1) / M. No saved mean/invstd
      // (both NULL, as cuDNN allows): the backward recomputes invstd from var.
      ANVIL_CUDA_CHECK(cudaMemsetAsync(a.mean, 0, vec_bytes, st));
      ANVIL_CUDA_CHECK(cudaMemsetAsync(a.var, 0, vec_bytes, st));
      ANVIL_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
          h, CUDNN_BATCHNORM_SPATIAL, one_zero.one(), one_zero.zero(), x_desc.get(), a.x,
          x_desc.get(), a.y, bn_desc.get(), a.weight, a.bias, /*exponentialAverageFactor=*/1.0,
          a.mean, a.var, p.eps, /*resultSaveMean=*/nullptr, /*resultSaveInvVariance=*/nullptr));
      bn_scale_vector(st, p.dtype, a.var, p.c, cudnn_biased_variance_factor(p));
      return;
    }
    case BatchNormPass::forward_inference:
      ANVIL_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
          h, CUDNN_BATCHNORM_SPATIAL, one_zero.one(), one_zero.zero(), x_desc.get(), a.x,
          x_desc.get(), a.y, bn_desc.get(), a.weight, a.bias, a.mean, a.var, p.eps));
      return;
    case BatchNormPass::backward:
      // Batch statistics only (the support declines eval mode). dx, dweight and dbias are
      // overwritten (beta = 0 for both the data and the parameter gradients).
      bn_inv_std(st, p.dtype, a.var, invstd.data_ptr(), p.c, p.eps);
      ANVIL_CUDNN_CHECK(cudnnBatchNormalizationBackward(
          h, CUDNN_BATCHNORM_SPATIAL, one_zero.one(), one_zero.zero(), one_zero.one(),
          one_zero.zero(), x_desc.get(), a.x, x_desc.get(), a.dy, x_desc.get(), a.dx, bn_desc.get(),
          a.weight, a.dweight, a.dbias, p.eps, a.mean, invstd.data_ptr()));
      return;
  }
}

}  // namespace anvil::cuda
