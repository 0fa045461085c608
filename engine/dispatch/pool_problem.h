// SPDX-License-Identifier: Apache-2.0
#pragma once
// The 2-D pooling problem descriptor and its three variant tables ("max_pool2d", "avg_pool2d",
// "adaptive_avg_pool2d"; one per kind, so each can be forced and listed on its own).
//
//   x [N, C, H, W] -> y [N, C, OH, OW], dense NCHW; backward: dy [N,C,OH,OW] -> dx [N,C,H,W].
//   Window (oh, ow) covers rows oh*SH - PH .. +KH-1 and columns ow*SW - PW .. +KW-1 (clipped to
//   the input); adaptive pooling uses PyTorch's bins [floor(i*H/OH), ceil((i+1)*H/OH)).
// Geometry rules (PyTorch's): Note [Pool output size] in pool_problem.cpp.
// Variants: ref (f32/f64), cpu.omp (f32/f64), cpu.onednn (f32), cuda.custom and cuda.cudnn
// (f32/f64; docs/cuda.md, "Pooling and batch norm on the GPU").
#include <array>
#include <cstdint>
#include <string>
#include <tuple>

#include "engine/core/device.h"
#include "engine/core/dtype.h"
#include "engine/core/tensor.h"
#include "engine/dispatch/variant_table.h"

namespace anvil {

enum class PoolKind : std::uint8_t { max, avg, adaptive_avg };
// forward_training differs from forward_inference for max pooling only: it also records where
// each maximum came from (Note [Max-pool workspace]).
enum class PoolPass : std::uint8_t { forward_inference, forward_training, backward };

// "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d": the table (op) name of a kind.
const char* pool_op_name(PoolKind kind);
const char* pool_pass_name(PoolPass pass);

struct PoolProblem {
  PoolKind kind = PoolKind::max;
  PoolPass pass = PoolPass::forward_inference;
  DType dtype = DType::f32;
  Device device = Device::cpu();
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  std::int64_t kh = 0, kw = 0;  // window (0 for adaptive pooling)
  std::int64_t sh = 0, sw = 0;  // stride (0 for adaptive pooling)
  std::int64_t ph = 0, pw = 0;  // left/top padding; the right/bottom side is implied by OH/OW
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg only
  std::int64_t oh = 0, ow = 0;

  DeviceType device_type() const { return device.type; }
  // Every member (Note [Problem fields], engine/dispatch/problem_fields.h).
  bool operator==(const PoolProblem&) const = default;
  auto fields() const {
    return std::tie(kind, pass, dtype, device, n, c, h, w, kh, kw, sh, sw, ph, pw, ceil_mode,
                    count_include_pad, oh, ow);
  }
  std::string key() const;  // every field
  std::string repr()
      const;  // "max_pool2d forward_training f32 cpu N=16 C=64 H=112 W=112 k=3x3 s=2x2 p=1x1 ..."
  std::int64_t planes() const { return n * c; }
  std::int64_t in_numel() const { return n * c * h * w; }
  std::int64_t out_numel() const { return n * c * oh * ow; }
  // Window additions/comparisons (adaptive: summed bin sizes); backward: the same count.
  double flops() const;
  // Bytes read and written once (input, output, max workspace at 4 bytes per output).
  double bytes() const;
  // The same problem for another pass.
  PoolProblem with_pass(PoolPass p) const {
    PoolProblem q = *this;
    q.pass = p;
    return q;
  }
};

// Builds and validates the problem of `kind` (max or avg) for an input of shape x_shape
// ([N,C,H,W]); stride 0 means "same as the kernel". Throws anvil::Error naming `where`
// (wrong rank, non-positive kernel/stride, negative padding, padding above half the kernel,
// a kernel larger than the padded input, a non-float dtype).
PoolProblem make_pool_problem(PoolKind kind, const Shape& x_shape,
                              std::array<std::int64_t, 2> kernel,
                              std::array<std::int64_t, 2> stride,
                              std::array<std::int64_t, 2> padding, bool ceil_mode,
                              bool count_include_pad, DType dtype, Device device,
                              const char* where);
// Adaptive average pooling to output_size (OH, OW >= 1).
PoolProblem make_adaptive_pool_problem(const Shape& x_shape,
                                       std::array<std::int64_t, 2> output_size, DType dtype,
                                       Device device, const char* where);

// PyTorch's output length (Note [Pool output size]).
std::int64_t pool_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                              std::int64_t pad, bool ceil_mode);
// Adaptive bin [start, end) of output index i (PyTorch: floor(i*in/out), ceil((i+1)*in/out)).
inline std::int64_t adaptive_start(std::int64_t i, std::int64_t in, std::int64_t out) {
  return (i * in) / out;
}
inline std::int64_t adaptive_end(std::int64_t i, std::int64_t in, std::int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

// Note [Max-pool workspace]
// The training forward of max pooling records where each maximum came from, and the backward
// routes dy there. The record's format belongs to the variant that wrote it: ref and cpu.omp
// store the int32 offset ih*W + iw inside the input plane; cpu.onednn stores oneDNN's own
// workspace (bytes whose meaning is private to the oneDNN implementation). So the variant
// allocates the workspace tensor itself, and the backward of a max pooling always runs the
// variant that produced its workspace (engine/ops/pool.cpp), whatever a newer selection would be.
struct PoolArgs {
  PoolProblem problem;
  const void* x = nullptr;   // [N, C, H, W]   forward passes
  void* y = nullptr;         // [N, C, OH, OW] forward passes
  const void* dy = nullptr;  // [N, C, OH, OW] backward
  void* dx = nullptr;        // [N, C, H, W]   backward (written entirely, also where zero)
  // max, forward_training: the variant stores its workspace here (any dtype/shape it likes);
  // max, backward: the workspace its own forward_training stored. Unused otherwise.
  Tensor* workspace = nullptr;
};

using PoolTable = VariantTable<PoolProblem, PoolArgs>;
PoolTable& max_pool2d_table();
PoolTable& avg_pool2d_table();
PoolTable& adaptive_avg_pool2d_table();
PoolTable& pool_table(PoolKind kind);

}  // namespace anvil
