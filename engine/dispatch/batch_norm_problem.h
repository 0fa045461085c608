// SPDX-License-Identifier: Apache-2.0
#pragma once
// The 2-D batch-normalisation problem descriptor and its variant table ("batch_norm2d").
//
//   x, y, dy, dx [N, C, H, W] dense NCHW; weight, bias, mean, var, dweight, dbias [C].
//   y = (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c]
//   forward_training:  mean/var are the batch statistics over N, H, W (biased variance), written
//                      to `mean`/`var`; the running statistics are updated by engine/ops.
//   forward_inference: mean/var are read (the running statistics).
//   backward:          dx, dweight, dbias from dy, x, weight and the mean/var the forward used;
//                      batch_stats says whether they were batch statistics (the gradient then
//                      flows through them) or constants (eval mode).
// Variants: ref (f32/f64), cpu.omp (f32/f64), cpu.onednn (f32), cuda.cudnn and cuda.custom
// (f32/f64; docs/cuda.md, "Pooling and batch norm on the GPU").
#include <cstdint>
#include <string>
#include <tuple>

#include "engine/core/device.h"
#include "engine/core/dtype.h"
#include "engine/core/tensor.h"
#include "engine/dispatch/variant_table.h"

namespace anvil {

enum class BatchNormPass : std::uint8_t { forward_training, forward_inference, backward };
const char* batch_norm_pass_name(BatchNormPass pass);

struct BatchNormProblem {
  BatchNormPass pass = BatchNormPass::forward_training;
  bool batch_stats = true;  // normalised with batch statistics (training mode)
  DType dtype = DType::f32;
  Device device = Device::cpu();
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  double momentum = 0.1;  // running-statistics update (done by engine/ops, not the kernels)
  double eps = 1e-5;

  DeviceType device_type() const { return device.type; }
  // Every member (Note [Problem fields], engine/dispatch/problem_fields.h).
  bool operator==(const BatchNormProblem&) const = default;
  auto fields() const {
    return std::tie(pass, batch_stats, dtype, device, n, c, h, w, momentum, eps);
  }
  std::string key() const;  // every field (eps exactly: oneDNN bakes it into its primitive)
  std::string repr()
      const;  // "batch_norm2d forward_training f32 cpu N=16 C=64 H=112 W=112 eps=1e-05"
  std::int64_t numel() const { return n * c * h * w; }
  std::int64_t per_channel() const { return n * h * w; }  // elements per statistic
  double flops() const;  // a per-element count model (see the .cpp)
  double bytes() const;  // x/y/dy/dx streamed once each
  BatchNormProblem with_pass(BatchNormPass p) const {
    BatchNormProblem q = *this;
    q.pass = p;
    if (p != BatchNormPass::backward) q.batch_stats = p == BatchNormPass::forward_training;
    return q;
  }
};

// Validates an input shape ([N,C,H,W], float) and builds the problem; training needs more than
// one value per channel (N*H*W > 1), as in PyTorch. Throws anvil::Error naming `where`.
BatchNormProblem make_batch_norm_problem(const Shape& x_shape, bool training, double momentum,
                                         double eps, DType dtype, Device device, const char* where);

struct BatchNormArgs {
  BatchNormProblem problem;
  const void* x = nullptr;       // [N, C, H, W]
  void* y = nullptr;             // forward
  const void* weight = nullptr;  // [C] (the engine passes ones when the layer has none)
  const void* bias = nullptr;    // [C] (zeros when none)
  void* mean = nullptr;          // [C] forward_training writes; other passes read
  void* var = nullptr;           // [C] biased variance; as mean
  const void* dy = nullptr;      // backward
  void* dx = nullptr;            // backward
  void* dweight = nullptr;       // backward [C]
  void* dbias = nullptr;         // backward [C]
};

using BatchNormTable = VariantTable<BatchNormProblem, BatchNormArgs>;
BatchNormTable& batch_norm2d_table();

}  // namespace anvil
