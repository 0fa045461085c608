// SPDX-License-Identifier: Apache-2.0
// `cuda.custom.fused` and `cuda.custom.unfused` in the LSTM table (engine/dispatch/
// lstm_problem.h), forward and backward. Note [Own CUDA LSTM].
//
// Note [Own CUDA LSTM]
// Forward: G [T*B, 4H] = bias rows, then G += x [T*B, I] w_ih^T as ONE GEMM over all T steps;
// per step t: G_t += h_{t-1} w_hh^T (one GEMM, skipped at t = 0 without h0), then the cell
// (lstm_kernels.h) turns G_t into the activated gates and writes c_t and h_t = y[t]. The
// activated gates and the c sequence are the saved state. Backward, t = T-1 .. 0: the cell
// backward gives dG_t from dy[t] + dh and dc, then dh = dG_t w_hh (one GEMM); afterwards
// dw_ih = dG^T x and dx = dG w_ih (one GEMM each over all steps), dw_hh = dG_{1..T-1}^T y_{0..T-2}
// (+ dG_0^T h0), db = column sums of dG. The GEMMs go through the gemm table, so they run the
// table's CUDA choice: cuda.cublas, IEEE FP32 (cuBLAS default math); TF32 only when the user
// forces cuda.cublas.tf32 (opt-in). `fused`: one pointwise kernel per step and direction;
// `unfused`: one launch per pointwise operation (8 forward, 8 backward per step).
#include <cuda_runtime_api.h>

#include <memory>

#include "engine/core/tensor.h"
#include "engine/dispatch/gemm_call.h"
#include "engine/dispatch/lstm_problem.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_guard.h"
#include "kernels/cuda/lstm_kernels.h"
#include "kernels/cuda/register.h"

namespace anvil::cuda {
namespace {

struct CudaLstmSaved final : LstmSaved {
  Tensor gates;  // [T*B, 4H] activated i, f, g, o
  Tensor cs;     // [T, B, H] the c sequence
};

// Row-major C[m, n] = op(A) op(B) (+ C with beta_one) on `device`, through the gemm table
// (Note [GEMM through the table]).
void gemm(Device device, DType dt, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
          const void* a, std::int64_t lda, const void* b, std::int64_t ldb, void* c,
          std::int64_t ldc, bool beta_one) {
  if (m == 0 || n == 0) return;
  ANVIL_CHECK(k > 0, "cuda.custom lstm", "empty GEMM sum (k = 0)");
  GemmArgs args;
  args.problem = GemmProblem::dense(m, n, k, ta, tb, dt);
  args.problem.device = device;
  args.problem.lda = lda;
  args.problem.ldb = ldb;
  args.problem.ldc = ldc;
  args.problem.beta_zero = !beta_one;
  args.a = a;
  args.b = b;
  args.c = c;
  args.alpha = 1.0;
  args.beta = beta_one ? 1.0 : 0.0;
  run_gemm(args);
}

const char* at(const void* p, std::int64_t elements, DType dt) {
  return static_cast<const char*>(p) + elements * static_cast<std::int64_t>(dtype_size(dt));
}
char* at(void* p, std::int64_t elements, DType dt) {
  return static_cast<char*>(p) + elements * static_cast<std::int64_t>(dtype_size(dt));
}

void copy_d2d(void* dst, const void* src, std::int64_t elements, DType dt, cudaStream_t s) {
  ANVIL_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(elements) * dtype_size(dt),
                                   cudaMemcpyDeviceToDevice, s));
}

void forward(const LstmArgs& a, bool fused) {
  const LstmProblem& p = a.problem;
  const std::int64_t T = p.T, B = p.B, I = p.I, H = p.H, G = 4 * H, rows = T * B;
  const DType dt = p.dtype;
  const Device dev = p.device;
  cudaStream_t s = stream(dev.index);
  DeviceGuard guard(dev.index);
  auto saved = std::make_shared<CudaLstmSaved>();
  saved->variant = fused ? "cuda.custom.fused" : "cuda.custom.unfused";
  saved->gates = Tensor::empty({rows, G}, dt, dev);
  saved->cs = Tensor::empty({T, B, H}, dt, dev);
  Tensor scratch;
  if (!fused) scratch = Tensor::empty({B, H}, dt, dev);
  void* g = saved->gates.data_ptr();
  void* cs = saved->cs.data_ptr();
  lstm_bias_rows(s, dt, g, a.b_ih, a.b_hh, rows, G);
  gemm(dev, dt, false, true, rows, G, I, a.x, I, a.w_ih, I, g, G, true);  // all T steps at once
  for (std::int64_t t = 0; t < T; ++t) {
    void* gt = at(g, t * B * G, dt);
    const void* h_prev = t > 0 ? at(a.y, (t - 1) * B * H, dt) : a.h0;
    const void* c_prev = t > 0 ? at(cs, (t - 1) * B * H, dt) : a.c0;
    if (h_prev != nullptr) gemm(dev, dt, false, true, B, G, H, h_prev, H, a.w_hh, H, gt, G, true);
    lstm_cell_forward(s, dt, fused, gt, c_prev, at(cs, t * B * H, dt), at(a.y, t * B * H, dt),
                      fused ? nullptr : scratch.data_ptr(), B, H);
  }
  copy_d2d(a.h_n, at(a.y, (T - 1) * B * H, dt), B * H, dt, s);
  copy_d2d(a.c_n, at(cs, (T - 1) * B * H, dt), B * H, dt, s);
  if (p.pass == LstmPass::forward_training) {
    ANVIL_CHECK(a.saved != nullptr, saved->variant.c_str(), "no place for the saved state");
    *a.saved = std::move(saved);
  }
}

void backward(const LstmArgs& a, bool fused) {
  const LstmProblem& p = a.problem;
  const char* name = fused ? "cuda.custom.fused" : "cuda.custom.unfused";
  ANVIL_CHECK(a.saved != nullptr && *a.saved != nullptr, name, "no saved state for ", p.repr());
  const auto* saved = dynamic_cast<const CudaLstmSaved*>(a.saved->get());
  ANVIL_CHECK(saved != nullptr && saved->variant == name, name,
              "the saved state is not this variant's (", (*a.saved)->variant, ")");
  const std::int64_t T = p.T, B = p.B, I = p.I, H = p.H, G = 4 * H, rows = T * B;
  const DType dt = p.dtype;
  const Device dev = p.device;
  cudaStream_t s = stream(dev.index);
  DeviceGuard guard(dev.index);
  Tensor dgates = Tensor::empty({rows, G}, dt, dev);
  Tensor dh = Tensor::empty({B, H}, dt, dev);
  Tensor dc = Tensor::empty({B, H}, dt, dev);
  Tensor scratch;
  if (!fused) scratch = Tensor::empty({3, B, H}, dt, dev);
  const void* g = saved->gates.data_ptr();
  const void* cs = saved->cs.data_ptr();
  void* dg = dgates.data_ptr();
  for (std::int64_t t = T - 1; t >= 0; --t) {
    const bool last = t == T - 1;
    const void* c_prev = t > 0 ? at(cs, (t - 1) * B * H, dt) : a.c0;
    void* dg_t = at(dg, t * B * G, dt);
    lstm_cell_backward(s, dt, fused, at(g, t * B * G, dt), c_prev, at(cs, t * B * H, dt),
                       at(a.dy, t * B * H, dt), last ? a.dh_n : dh.data_ptr(),
                       last ? a.dc_n : dc.data_ptr(), dg_t, dc.data_ptr(),
                       fused ? nullptr : scratch.data_ptr(), B, H);
    // dh for step t-1 (or dh0): dG_t [B, 4H] w_hh [4H, H].
    if (t > 0 || p.has_initial_state)
      gemm(dev, dt, false, false, B, H, G, dg_t, G, a.w_hh, H, dh.data_ptr(), H, false);
  }
  if (p.has_initial_state) {
    ANVIL_CHECK(a.dh0 != nullptr && a.dc0 != nullptr, name, "dh0/dc0 buffers missing");
    copy_d2d(a.dh0, dh.data_ptr(), B * H, dt, s);
    copy_d2d(a.dc0, dc.data_ptr(), B * H, dt, s);
  }
  // Weight and input gradients over all steps at once.
  gemm(dev, dt, true, false, G, I, rows, dg, G, a.x, I, a.dw_ih, I, false);
  if (T > 1)
    gemm(dev, dt, true, false, G, H, (T - 1) * B, at(dg, B * G, dt), G, a.y, H, a.dw_hh, H, false);
  else
    ANVIL_CUDA_CHECK(
        cudaMemsetAsync(a.dw_hh, 0, static_cast<std::size_t>(G * H) * dtype_size(dt), s));
  if (a.h0 != nullptr) gemm(dev, dt, true, false, G, H, B, dg, G, a.h0, H, a.dw_hh, H, true);
  lstm_column_sums(s, dt, dg, a.db_ih, rows, G);
  if (a.db_hh != nullptr) copy_d2d(a.db_hh, a.db_ih, G, dt, s);
  if (a.dx != nullptr) gemm(dev, dt, false, false, rows, I, G, dg, G, a.w_ih, I, a.dx, I, false);
}

void run(const LstmArgs& a, bool fused) {
  if (a.problem.pass == LstmPass::backward)
    backward(a, fused);
  else
    forward(a, fused);
}

Support supports(const LstmProblem& p) {
  if (p.dtype != DType::f32 && p.dtype != DType::f64)
    return Support::no(detail::str_cat("needs f32 or f64, got ", dtype_name(p.dtype)));
  if (p.T < 1 || p.B < 1 || p.I < 1 || p.H < 1)
    return Support::no(detail::str_cat("empty sizes in ", p.repr()));
  return Support::yes();
}

}  // namespace

void register_cuda_lstm() {
  lstm_table().add({.name = "cuda.custom.fused",
                    .device = DeviceType::cuda,
                    .supports = supports,
                    .fn = [](const LstmArgs& a) { run(a, true); },
                    .description = "one input GEMM for all steps; per step a recurrent GEMM "
                                   "and one fused gate kernel (forward and backward)"});
  lstm_table().add({.name = "cuda.custom.unfused",
                    .device = DeviceType::cuda,
                    .supports = supports,
                    .fn = [](const LstmArgs& a) { run(a, false); },
                    .description = "as cuda.custom.fused, but every pointwise gate operation "
                                   "its own kernel (DLBench's many small kernels)"});
}

}  // namespace anvil::cuda
