// SPDX-License-Identifier: Apache-2.0
#pragma once
// The pure logic of the GPU pooling and batch-norm variants: which problems `cuda.custom` and
// `cuda.cudnn` run, the reason text when they decline, and the cuDNN pooling descriptor's
// parameters for a problem. Header-only plain C++ (no CUDA or cuDNN header), so the CPU test
// tests/test_cuda_pool_bn_plan.cpp checks it on a machine without a GPU; the registrations in
// pool_register.cpp and batch_norm_register.cpp call exactly these functions.
// Semantics and the reasons for each refusal: docs/cuda.md, "Pooling and batch norm on the GPU".
#include <cstdint>
#include <limits>
#include <string>

#include "engine/core/error.h"
#include "engine/dispatch/batch_norm_problem.h"
#include "engine/dispatch/pool_problem.h"
#include "engine/dispatch/selection.h"

namespace anvil::cuda {

// cuDNN's legacy 4-D tensor descriptors (cudnnSetTensor4dDescriptor) take int extents and int
// strides, so the element count of every tensor must fit in an int.
inline constexpr std::int64_t kCudnnIntMax = std::numeric_limits<std::int32_t>::max();

inline Support gpu_floating_only(DType dtype) {
  if (dtype == DType::f32 || dtype == DType::f64) return Support::yes();
  return Support::no(detail::str_cat("needs f32 or f64, got ", dtype_name(dtype)));
}

// ---- pooling ----------------------------------------------------------------------------------

// cuda.custom (pool_kernels.cu): every kind, pass, padding, ceil mode and adaptive size; the max
// index is int32 (ih*W + iw, Note [Max-pool workspace]), so a plane must hold < 2^31 elements.
inline Support custom_pool_support(const PoolProblem& p) {
  if (Support s = gpu_floating_only(p.dtype); !s.ok) return s;
  if (p.kind == PoolKind::max && p.h * p.w > kCudnnIntMax)
    return Support::no(detail::str_cat("the int32 max index cannot address an input plane of ", p.h,
                                       "x", p.w, " elements"));
  return Support::yes();
}

// Mirrors cudnnPoolingMode_t (the cuDNN names are in cudnn_pool_mode_name()).
enum class CudnnPoolMode : std::uint8_t {
  max_deterministic,
  avg_include_padding,
  avg_exclude_padding
};

inline const char* cudnn_pool_mode_name(CudnnPoolMode m) {
  switch (m) {
    case CudnnPoolMode::max_deterministic:
      return "CUDNN_POOLING_MAX_DETERMINISTIC";
    case CudnnPoolMode::avg_include_padding:
      return "CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING";
    case CudnnPoolMode::avg_exclude_padding:
      return "CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING";
  }
  return "?";
}

// What cudnnSetPooling2dDescriptor and the two cudnnSetTensor4dDescriptor calls receive, or why
// cuda.cudnn declines the problem (support.ok false, the reason in support.reason).
struct CudnnPoolPlan {
  Support support;
  CudnnPoolMode mode = CudnnPoolMode::max_deterministic;
  int window_h = 0, window_w = 0, pad_h = 0, pad_w = 0, stride_h = 0, stride_w = 0;
  int n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;  // x [n,c,h,w], y [n,c,oh,ow], NCHW packed
};

// Note [cuDNN pooling refusals]
// - max, forward_training and backward: anvil's max backward receives only the workspace of its
//   forward (the int32 index of ref's first maximum, Note [Max-pool workspace]), not x and y.
//   cudnnPoolingBackward instead recomputes the argmax from x and y, and the cuDNN documentation
//   does not say which of several equal elements receives the gradient (ties are common: the
//   zeros after a ReLU). So cuda.cudnn runs max pooling for inference only, with
//   CUDNN_POOLING_MAX_DETERMINISTIC and CUDNN_PROPAGATE_NAN (in ref a NaN always wins); the
//   value of a window does not depend on which tied element wins. cuda.custom trains.
// - ceil_mode, when it adds an output row or column: cuDNN computes floor((H + 2*PH - KH)/SH) + 1
//   and pads both sides equally; the extra ceil window, and PyTorch's divisor for it, have no
//   cuDNN equivalent. When ceil and floor give the same size the problem is the same and runs.
// - adaptive average: cuDNN windows have one size and one stride, so only uniform bins run
//   (H % OH == 0 and W % OW == 0: window = stride = H/OH x W/OW, no padding); that includes
//   global average pooling (OH = OW = 1).
// - more than 2^31-1 elements in x or y (int descriptors).
inline CudnnPoolPlan cudnn_pool_plan(const PoolProblem& p) {
  CudnnPoolPlan plan;
  auto no = [&](std::string why) {
    plan.support = Support::no(std::move(why));
    return plan;
  };
  if (Support s = gpu_floating_only(p.dtype); !s.ok) return no(s.reason);
  if (p.in_numel() > kCudnnIntMax || p.out_numel() > kCudnnIntMax)
    return no(detail::str_cat("cuDNN's 4-D tensor descriptors take int extents and strides; x has ",
                              p.in_numel(), " and y ", p.out_numel(), " elements (limit ",
                              kCudnnIntMax, ")"));
  std::int64_t kh = p.kh, kw = p.kw, sh = p.sh, sw = p.sw, ph = p.ph, pw = p.pw;
  switch (p.kind) {
    case PoolKind::max:
      if (p.pass != PoolPass::forward_inference)
        return no(
            "max pooling for training needs the int32 first-maximum index that anvil's max "
            "backward reads (Note [Max-pool workspace]); cudnnPoolingBackward recomputes the "
            "argmax from x and y and leaves open which tied element gets the gradient, so "
            "cuda.cudnn runs max pooling for inference only (cuda.custom trains)");
      plan.mode = CudnnPoolMode::max_deterministic;
      break;
    case PoolKind::avg:
      plan.mode = p.count_include_pad ? CudnnPoolMode::avg_include_padding
                                      : CudnnPoolMode::avg_exclude_padding;
      break;
    case PoolKind::adaptive_avg:
      if (p.h % p.oh != 0 || p.w % p.ow != 0)
        return no(detail::str_cat("adaptive bins of ", p.h, "x", p.w, " -> ", p.oh, "x", p.ow,
                                  " differ in size (H % OH or W % OW is not 0); a cuDNN pooling "
                                  "window has one size and one stride"));
      kh = sh = p.h / p.oh;
      kw = sw = p.w / p.ow;
      ph = pw = 0;
      plan.mode = CudnnPoolMode::avg_exclude_padding;  // no padding: both modes divide by KH*KW
      break;
  }
  if (p.kind != PoolKind::adaptive_avg && p.ceil_mode) {
    const std::int64_t fh = pool_output_size(p.h, p.kh, p.sh, p.ph, false),
                       fw = pool_output_size(p.w, p.kw, p.sw, p.pw, false);
    if (fh != p.oh || fw != p.ow)
      return no(detail::str_cat("ceil_mode gives ", p.oh, "x", p.ow,
                                " outputs where cuDNN's floor "
                                "rule gives ",
                                fh, "x", fw,
                                "; cuDNN has no ceil mode and pads "
                                "both sides equally"));
  }
  plan.support = Support::yes();
  plan.window_h = static_cast<int>(kh);
  plan.window_w = static_cast<int>(kw);
  plan.pad_h = static_cast<int>(ph);
  plan.pad_w = static_cast<int>(pw);
  plan.stride_h = static_cast<int>(sh);
  plan.stride_w = static_cast<int>(sw);
  plan.n = static_cast<int>(p.n);
  plan.c = static_cast<int>(p.c);
  plan.h = static_cast<int>(p.h);
  plan.w = static_cast<int>(p.w);
  plan.oh = static_cast<int>(p.oh);
  plan.ow = static_cast<int>(p.ow);
  return plan;
}

// ---- batch norm -------------------------------------------------------------------------------

// cuda.custom (batch_norm_kernels.cu): every pass, training and eval mode.
inline Support custom_batch_norm_support(const BatchNormProblem& p) {
  return gpu_floating_only(p.dtype);
}

// Note [cuDNN batch norm]
// cuda.cudnn calls the CUDNN_BATCHNORM_SPATIAL functions (statistics over N, H, W per channel):
// - forward_training: cudnnBatchNormalizationForwardTraining with exponentialAverageFactor 1 and
//   the running-statistics outputs pointed at the problem's mean/var buffers, zeroed before the
//   call. cuDNN computes running = factor * batch + (1 - factor) * running, so with factor 1
//   they receive the batch mean and the batch variance in cuDNN's running convention, which is
//   the unbiased (sample) variance, sum (x - mean)^2 / (M - 1) with M = N*H*W. A small kernel
//   multiplies it by (M - 1) / M, giving the biased variance that anvil's problem defines (and
//   that the backward and the engine's running update expect). The engine then applies
//   PyTorch's momentum update with M / (M - 1) (engine/ops/batch_norm.cpp), as for every
//   variant: the running statistics follow the same formula on every device.
//   Zeroing matters: with factor 1 a NaN left in the buffer would still give 0 * NaN = NaN.
// - forward_inference: cudnnBatchNormalizationForwardInference with the given mean/var.
// - backward with batch statistics: cudnnBatchNormalizationBackward with savedMean = mean and
//   savedInvVariance = 1 / sqrt(var + eps) (what cuDNN's forward saves under that name is the
//   inverse standard deviation), written by a small kernel.
// - backward in eval mode (batch_stats false) is declined: cudnnBatchNormalizationBackward
//   always differentiates through the batch statistics.
inline Support cudnn_batch_norm_support(const BatchNormProblem& p) {
  if (Support s = gpu_floating_only(p.dtype); !s.ok) return s;
  if (p.numel() > kCudnnIntMax)
    return Support::no(
        detail::str_cat("cuDNN's 4-D tensor descriptors take int extents and "
                        "strides; x has ",
                        p.numel(), " elements (limit ", kCudnnIntMax, ")"));
  if (p.pass == BatchNormPass::backward && !p.batch_stats)
    return Support::no(
        "eval-mode backward (mean and variance are constants): cudnnBatchNormalizationBackward "
        "always differentiates through the batch statistics");
  if (p.pass == BatchNormPass::forward_training && p.per_channel() < 2)
    return Support::no(
        detail::str_cat("training needs at least 2 values per channel (cuDNN's "
                        "variance is unbiased, divided by M - 1), got M = ",
                        p.per_channel()));
  return Support::yes();
}

// The factor that turns cuDNN's unbiased batch variance into the biased one: (M - 1) / M.
inline double cudnn_biased_variance_factor(const BatchNormProblem& p) {
  const double m = static_cast<double>(p.per_channel());
  return (m - 1.0) / m;
}

}  // namespace anvil::cuda
