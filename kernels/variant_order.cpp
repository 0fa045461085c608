// SPDX-License-Identifier: Apache-2.0
// The one ordered list of variant names per op (Note [Variant order]): the default order of
// selection step 4 (Note [Variant selection]) and of every listing. A variant registers by name
// only; a name missing here is an error at registration. CPU and CUDA variants share one list
// (selection skips the other device's variants), so the CUDA library, which registers its
// variants on first GPU use, finds its places here too. To reorder, edit the list; where a
// heuristic picks per problem (GEMM, conv2d, LSTM), the order applies where it names nothing.
#include "kernels/variant_order.h"

#include "engine/dispatch/batch_norm_problem.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/dropout_problem.h"
#include "engine/dispatch/elementwise_problem.h"
#include "engine/dispatch/embedding_problem.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/lstm_problem.h"
#include "engine/dispatch/optimizer_problem.h"
#include "engine/dispatch/pool_problem.h"
#include "engine/dispatch/reduce_problem.h"
#include "engine/dispatch/softmax_problem.h"

namespace anvil::kernels {

void declare_variant_orders() {
  // oneDNN's sgemm is best or within 2 % on large GEMMs in every mode; the matmul primitive wins
  // skinny-M transposed-B GEMMs by rule; Eigen trails everywhere (Note [GEMM heuristic]).
  // cuda.cublas.tf32 runs only when forced (Note [TF32 is opt-in]). bf16: oneDNN's matmul
  // before the own vdpbf16ps kernel, which has no cache blocking: the AlexNet bf16 training
  // step 1.21-1.23 s -> 0.70-0.72 s, FCN-5 1.44-1.90 s -> 0.38-0.41 s (1 thread, two rounds,
  // 2026-11-28, docs/results/precision_cpu_2026-11-28/onednn_bf16_gemm.md).
  gemm_table().set_order({"cpu.onednn", "cuda.cublas", "cpu.onednn.matmul", "cpu.eigen",
                          "cuda.cublas.tf32", "cpu.blocked", "cpu.onednn.matmul_bf16",
                          "cpu.bf16_avx512", "cpu.bf16_via_f32", "cpu.f16_via_f32",
                          "cuda.custom.gemm_tiled", "ref"});
  elementwise_table().set_order({"cpu.omp", "cuda.custom.elementwise", "ref"});
  reduce_table().set_order({"cpu.omp", "cuda.custom.reduce", "ref"});
  softmax_table().set_order({"cpu.omp", "cuda.custom.softmax", "ref"});
  // oneDNN's JIT pooling first; a heuristic names cpu.omp where oneDNN falls back to slow code
  // (Note [Pool default order]). bf16 likewise: oneDNN's JIT bf16 pooling, else the plane-wise
  // widening fallback (Note [oneDNN bf16 pooling]); f16 has only the fallback.
  for (PoolKind kind : {PoolKind::max, PoolKind::avg, PoolKind::adaptive_avg})
    pool_table(kind).set_order({"cpu.onednn", "cpu.onednn.bf16", "cpu.omp", "cpu.bf16_via_f32",
                                "cpu.f16_via_f32", "cuda.custom", "cuda.cudnn", "ref"});
  // cpu.onednn after cpu.omp: on plain NCHW oneDNN 2.6 runs `ncsp_bnorm`, 3-10x slower on the
  // ResNet-50 shapes (docs/kernels/pool_bn.md).
  batch_norm2d_table().set_order({"cuda.cudnn", "cpu.omp", "cuda.custom", "cpu.onednn", "ref"});
  // Note [conv2d heuristic] picks per problem; this order applies where it names nothing (1x1,
  // strided 3x3, large filters). On CUDA: cuda.cudnn finds the fastest algorithm per problem;
  // its TF32 twin runs only when forced; then one variant per cuDNN algorithm family
  // (Note [cuDNN algorithm families], kernels/cudnn_conv_plan.h), then the own im2col kernels.
  // bf16: oneDNN's avx512_bf16 convolution, else its named fallback (Note [oneDNN bf16 conv]).
  conv_table().set_order({"cpu.onednn", "cpu.onednn.winograd", "cpu.im2col", "cpu.onednn.nchw",
                          "cpu.onednn.bf16", "cpu.bf16_via_f32", "cpu.f16_via_f32", "cuda.cudnn",
                          "cuda.cudnn.tf32", "cuda.cudnn.implicit_gemm",
                          "cuda.cudnn.implicit_precomp_gemm", "cuda.cudnn.gemm", "cuda.cudnn.fft",
                          "cuda.cudnn.fft_tiling", "cuda.cudnn.winograd",
                          "cuda.cudnn.winograd_nonfused", "cuda.custom.im2col", "ref"});
  // One-thread inference goes to cpu.onednn by heuristic (Note [LSTM heuristic]), the rest
  // follows the order.
  // cpu.fused.packed (Note [Prepacked recurrent weight]) runs when forced.
  lstm_table().set_order({"cpu.fused", "cpu.onednn", "cpu.fused.packed", "cuda.custom.fused",
                          "cuda.cudnn", "cuda.custom.unfused", "ref"});
  sgd_update_table().set_order({"cpu.omp", "cuda.custom.sgd", "ref"});
  adam_update_table().set_order({"cpu.omp", "cuda.custom.adam", "ref"});
  grad_norm_table().set_order({"cpu.omp", "cuda.custom.grad_norm", "ref"});
  grad_scale_table().set_order({"cpu.omp", "cuda.custom.grad_scale", "ref"});
  dropout_table().set_order({"cpu.mt19937", "cuda.custom.dropout", "ref"});
  embedding_table().set_order({"cpu.omp", "cuda.custom.embedding", "ref"});
}

}  // namespace anvil::kernels
