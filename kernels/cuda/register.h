// SPDX-License-Identifier: Apache-2.0
#pragma once
// The CUDA variants of libanvil_cuda.so join the engine's variant tables here, once, when the
// engine loads the backend (anvil_cuda_backend() in cuda_backend_impl.cpp). One function per
// kernel family, each defined in that family's file.
namespace anvil::cuda {

// Calls every family's registration below exactly once (thread-safe).
void register_cuda_kernels();

void register_cuda_gemm();         // gemm: cuda.cublas, cuda.cublas.tf32, cuda.custom.gemm_tiled
void register_cuda_pointwise();    // elementwise, reductions, softmax, cross-entropy, bias add
void register_cuda_training();     // optimizer updates, gradient-norm clipping, dropout
void register_cuda_conv();         // conv2d: cuda.cudnn[.tf32|.<algorithm>] (conv_cudnn.cpp)
void register_cuda_conv_im2col();  // conv2d: cuda.custom.im2col (conv_im2col.cpp)
// Pooling and batch norm: cuda.custom and cuda.cudnn (pool_register.cpp, batch_norm_register.cpp).
void register_cuda_pool();
void register_cuda_batch_norm();
void register_cuda_embedding();   // embedding: cuda.custom.embedding
void register_cuda_lstm();        // lstm: cuda.custom.fused, cuda.custom.unfused
void register_cuda_lstm_cudnn();  // lstm: cuda.cudnn

}  // namespace anvil::cuda
