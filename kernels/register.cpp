// SPDX-License-Identifier: Apache-2.0
// detail::fill_builtin_kernel_tables(): the one place that knows every built-in kernel family;
// register_builtin_kernels() (engine/dispatch/registration.cpp) calls it once, on first use of
// any table (Note [Kernel registration]).
#include "engine/dispatch/registration.h"
#include "kernels/cpu/bf16/conv_half.h"
#include "kernels/cpu/bf16/gemm_half.h"
#include "kernels/cpu/blocked/gemm_blocked.h"
#include "kernels/cpu/eigen/gemm_eigen.h"
#include "kernels/cpu/conv_heuristic.h"
#include "kernels/cpu/embedding_register.h"
#include "kernels/cpu/gemm_heuristic.h"
#include "kernels/cpu/lstm_heuristic.h"
#include "kernels/cpu/im2col/conv_im2col.h"
#include "kernels/cpu/omp/lstm_fused.h"
#include "kernels/cpu/omp/omp_kernels.h"
#include "kernels/cpu/onednn/conv_onednn.h"
#include "kernels/cpu/onednn/gemm_onednn.h"
#include "kernels/cpu/onednn/lstm_onednn.h"
#include "kernels/cpu/onednn/pool_bn_onednn.h"
#include "kernels/cpu/optimizer_register.h"
#include "kernels/cpu/ref/conv_ref.h"
#include "kernels/cpu/ref/lstm_ref.h"
#include "kernels/cpu/ref/ref_kernels.h"
#include "kernels/variant_order.h"

namespace anvil {

void detail::fill_builtin_kernel_tables() {
  {
    // Every table's order first: each variant below takes its place from it (Note [Variant order]).
    kernels::declare_variant_orders();
    // GEMM: own blocked kernel, Eigen, oneDNN (sgemm and matmul), the reference; then the
    // per-shape default choice (Note [GEMM heuristic]).
    kernels::register_gemm_ref();
    kernels::register_gemm_blocked();
    kernels::register_gemm_half();
    kernels::register_gemm_eigen();
    kernels::register_gemm_onednn();
    kernels::install_gemm_heuristic();
    // Pointwise ops.
    kernels::register_elementwise_ref();
    kernels::register_elementwise_omp();
    // Reductions (sum, max) and the softmax family (softmax, log-softmax, cross-entropy).
    kernels::register_reduce_ref();
    kernels::register_reduce_omp();
    kernels::register_softmax_ref();
    kernels::register_softmax_omp();
    // Pooling (max_pool2d, avg_pool2d, adaptive_avg_pool2d) and batch_norm2d.
    kernels::register_pool_ref();
    kernels::register_pool_omp();
    kernels::register_pool_onednn();
    kernels::register_batch_norm_ref();
    kernels::register_batch_norm_omp();
    kernels::register_batch_norm_onednn();
    // conv2d: reference, own im2col + gemm table, oneDNN (direct blocked/NCHW, winograd, bf16),
    // the 16-bit fallbacks; then the per-problem default choice (Note [conv2d heuristic]).
    kernels::register_conv_ref();
    kernels::register_conv_im2col();
    kernels::register_conv_onednn();
    kernels::register_conv_half();
    kernels::install_conv_heuristic();
    // lstm: reference composition (autograd), own fused GEMM + OpenMP kernel, oneDNN.
    kernels::register_lstm_ref();
    kernels::register_lstm_fused();
    kernels::register_lstm_onednn();
    // ... and one-thread inference on oneDNN's primitive (Note [LSTM heuristic]).
    kernels::install_lstm_heuristic();
    // Optimizer updates (sgd_update, adam_update), gradient-norm clipping (grad_norm,
    // grad_scale) and dropout.
    kernels::register_optimizer_ref();
    kernels::register_optimizer_omp();
    kernels::register_dropout_cpu();
    // embedding lookup and its backward (cpu.omp, ref).
    kernels::register_embedding_cpu();
  }
}

}  // namespace anvil
