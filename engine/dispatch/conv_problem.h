// SPDX-License-Identifier: Apache-2.0
#pragma once
// The 2-D convolution problem descriptor and its one variant table, "conv2d".
//
// NCHW activations, KCRS filters (PyTorch layout), cross-correlation as in every DL framework:
//   y[n, k, p, q] = b[k] + sum_{c in group(k), r, s} x[n, c, p*sh - ph + r*dh, q*sw - pw + s*dw]
//                                                   * w[k, c - group_start, r, s]
// with zero padding, P = (H + 2 ph - dh (R - 1) - 1) / sh + 1 (floor), Q likewise.
// One table holds all three passes (the pass is a problem field), so forcing a variant by name
// (ANVIL_VARIANT=conv2d=cpu.im2col) forces forward, backward-data and backward-weights together.
// Variants: ref (f32/f64), cpu.im2col, cpu.onednn, cpu.onednn.nchw, cpu.onednn.winograd; bf16:
// cpu.onednn.bf16 (avx512_bf16) and cpu.bf16_via_f32; f16: cpu.f16_via_f32; `cuda.cudnn.<algo>`.
#include <cstdint>
#include <string>
#include <tuple>

#include "engine/core/device.h"
#include "engine/core/dtype.h"
#include "engine/dispatch/variant_table.h"

namespace anvil {

enum class ConvPass { forward, backward_data, backward_weights };
const char* conv_pass_name(ConvPass pass);

struct ConvProblem {
  ConvPass pass = ConvPass::forward;
  DType dtype = DType::f32;
  Device device = Device::cpu();
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // input  [N, C, H, W]
  std::int64_t k = 0, r = 0, s = 0;         // filter [K, C/groups, R, S]
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_h = 0, pad_w = 0;  // zeros on both sides
  std::int64_t dil_h = 1, dil_w = 1;
  std::int64_t groups = 1;
  // forward: y gets + b[k]; backward_weights: db is computed too; backward_data: ignored.
  bool has_bias = false;
  // forward only: y = max(y, 0) in the same kernel (the backward passes never fuse).
  bool fuse_relu = false;

  std::int64_t p() const;  // output height
  std::int64_t q() const;  // output width
  std::int64_t c_per_group() const { return groups > 0 ? c / groups : 0; }
  std::int64_t k_per_group() const { return groups > 0 ? k / groups : 0; }
  bool is_pointwise() const;  // 1x1, stride 1, no padding: the input is its own im2col matrix

  DeviceType device_type() const { return device.type; }
  // Every member (Note [Problem fields], engine/dispatch/problem_fields.h).
  bool operator==(const ConvProblem&) const = default;
  auto fields() const {
    return std::tie(pass, dtype, device, n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w,
                    dil_h, dil_w, groups, has_bias, fuse_relu);
  }
  std::string key() const;  // every field (the autotune / primitive cache key)
  // "conv2d f32 cpu forward N=16 C=64 H=56 W=56 K=64 R=3 S=3 stride=1x1 pad=1x1 dil=1x1
  //  groups=1 bias relu -> P=56 Q=56"
  std::string repr() const;
  // Multiply-adds count 2; the bias adds N*K*P*Q (forward) and its gradient as many (backward
  // weights); relu is not counted.
  double flops() const;
  // Bytes of the pass's operands touched once (inputs read, outputs written).
  double bytes() const;
  // Throws anvil::Error naming `where` on non-positive sizes, groups that do not divide C and K,
  // or a filter larger than the padded input.
  void validate(const char* where) const;
};

// The data of one call. All tensors are dense (contiguous NCHW / KCRS); outputs are overwritten.
//   forward:          x, w, b (when has_bias)  -> y
//   backward_data:    dy, w                    -> dx
//   backward_weights: x, dy                    -> dw, db (when has_bias)
struct ConvArgs {
  ConvProblem problem;
  const void* x = nullptr;
  const void* w = nullptr;
  const void* b = nullptr;
  void* y = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
  void* dw = nullptr;
  void* db = nullptr;
};

using ConvTable = VariantTable<ConvProblem, ConvArgs>;
// The process-wide conv2d table (filled by register_builtin_kernels()).
ConvTable& conv_table();

}  // namespace anvil
