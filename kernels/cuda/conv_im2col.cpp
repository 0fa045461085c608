// SPDX-License-Identifier: Apache-2.0
// cuda.custom.im2col: conv2d on the GPU without cuDNN. Per sample and group, im2col (or col2im)
// kernels of conv_im2col_kernels.cu and one GEMM of the gemm table on the GPU (cuBLAS by
// default, so IEEE FP32 unless the gemm table is forced to TF32):
//   forward          y[n, g]  = W_g [Kg, CgRS] x col [CgRS, PQ]       then bias (+ ReLU) kernel
//   backward data    col      = W_g^T x dy[n, g] [Kg, PQ]             then col2im into dx[n, g]
//   backward filter  dW_g    += dy[n, g] x col^T (beta = 1 after the first sample); db kernel
// f32 and f64, any stride / padding / dilation / groups, fused bias + ReLU. N * groups GEMMs per
// call: slow for depthwise layers, a baseline beside cuDNN rather than a rival.
#include "engine/core/error.h"
#include "engine/core/tensor.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/gemm_call.h"
#include "kernels/cuda/conv_im2col_geometry.h"
#include "kernels/cuda/conv_im2col_kernels.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_guard.h"
#include "kernels/cuda/register.h"

namespace anvil::cuda {
namespace {

Support im2col_support(const ConvProblem& p) {
  if (p.dtype != DType::f32 && p.dtype != DType::f64)
    return Support::no(detail::str_cat("f32 or f64 only, got ", dtype_name(p.dtype)));
  return Support::yes();
}

// c = op(a) op(b) (+ c when beta == 1), row-major, through the gemm table on the problem's device
// (Note [GEMM through the table]: the same selection and autotune rule as every other GEMM).
void gemm(const ConvProblem& p, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
          const void* a, const void* b, void* c, double beta) {
  GemmArgs g;
  g.problem = GemmProblem::dense(m, n, k, ta, tb, p.dtype);
  g.problem.device = p.device;
  g.problem.beta_zero = beta == 0.0;
  g.a = a;
  g.b = b;
  g.c = c;
  g.alpha = 1.0;
  g.beta = beta;
  run_gemm(g);
}

void run_im2col(const ConvArgs& a) {
  const ConvProblem& p = a.problem;
  const int dev = p.device.index;
  cudaStream_t s = stream(dev);
  DeviceGuard guard(dev);
  const Im2colGeometry g = im2col_geometry_of(p);
  const std::int64_t kg = p.k_per_group(), crs = g.cg * g.r * g.s, pq = g.p * g.q;
  const std::int64_t hw = p.h * p.w;
  const std::size_t e = dtype_size(p.dtype);
  const Tensor col = Tensor::empty({crs * pq}, p.dtype, p.device);
  const auto at = [e](const void* base, std::int64_t elements) {
    return static_cast<const char*>(base) + static_cast<std::size_t>(elements) * e;
  };
  const auto at_mut = [e](void* base, std::int64_t elements) {
    return static_cast<char*>(base) + static_cast<std::size_t>(elements) * e;
  };
  for (std::int64_t n = 0; n < p.n; ++n) {
    for (std::int64_t gi = 0; gi < p.groups; ++gi) {
      const std::int64_t x_off = (n * p.c + gi * g.cg) * hw;
      const std::int64_t y_off = (n * p.k + gi * kg) * pq;
      const std::int64_t w_off = gi * kg * crs;
      switch (p.pass) {
        case ConvPass::forward:
          im2col(s, p.dtype, at(a.x, x_off), col.data_ptr(), g);
          gemm(p, false, false, kg, pq, crs, at(a.w, w_off), col.data_ptr(), at_mut(a.y, y_off),
               0.0);
          break;
        case ConvPass::backward_data:
          gemm(p, true, false, crs, pq, kg, at(a.w, w_off), at(a.dy, y_off), col.data_ptr(), 0.0);
          col2im(s, p.dtype, col.data_ptr(), at_mut(a.dx, x_off), g);
          break;
        case ConvPass::backward_weights:
          im2col(s, p.dtype, at(a.x, x_off), col.data_ptr(), g);
          gemm(p, false, true, kg, crs, pq, at(a.dy, y_off), col.data_ptr(), at_mut(a.dw, w_off),
               n == 0 ? 0.0 : 1.0);
          break;
      }
    }
  }
  if (p.pass == ConvPass::forward)
    bias_relu(s, p.dtype, a.y, p.has_bias ? a.b : nullptr, p.n, p.k, pq, p.fuse_relu);
  if (p.pass == ConvPass::backward_weights && p.has_bias && a.db != nullptr)
    bias_grad(s, p.dtype, a.dy, a.db, p.n, p.k, pq);
}

}  // namespace

void register_cuda_conv_im2col() {
  conv_table().add({
      .name = "cuda.custom.im2col",
      .device = DeviceType::cuda,
      .supports = im2col_support,
      .fn = run_im2col,
      .description = "own im2col / col2im kernels + the gemm table per sample and group, "
                     "fused bias + ReLU, f32/f64",
      .tags = {kTagWorkspace},  // the column buffer
  });
}

}  // namespace anvil::cuda
