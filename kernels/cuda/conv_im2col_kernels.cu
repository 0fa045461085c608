// SPDX-License-Identifier: Apache-2.0
// The kernels of cuda.custom.im2col (conv_im2col_kernels.h): im2col and col2im of one sample and
// group (one thread per output element, grid-stride loops), bias add with optional ReLU, and the
// bias gradient (one block per output channel, a block reduction in double). f32 and f64.
#include <cuda_runtime.h>

#include "kernels/cuda/conv_im2col_kernels.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/pointwise_geometry.cuh"

namespace anvil::cuda {
namespace {

template <typename T>
__global__ void im2col_kernel(const T* x, T* col, Im2colGeometry g) {
  const std::int64_t total = g.cg * g.r * g.s * g.p * g.q;
  for (std::int64_t i = global_thread(); i < total; i += grid_threads())
    col[i] = im2col_value(x, g, i);
}

template <typename T>
__global__ void col2im_kernel(const T* col, T* dx, Im2colGeometry g) {
  const std::int64_t total = g.cg * g.h * g.w;
  for (std::int64_t i = global_thread(); i < total; i += grid_threads())
    dx[i] = col2im_value(col, g, i);
}

template <typename T>
__global__ void bias_relu_kernel(T* y, const T* b, std::int64_t total, std::int64_t k,
                                 std::int64_t pq, bool relu) {
  for (std::int64_t i = global_thread(); i < total; i += grid_threads()) {
    T v = y[i];
    if (b != nullptr) v += b[(i / pq) % k];
    if (relu) v = v > T(0) ? v : (v != v ? v : T(0));  // NaN propagates, as max(x, 0) on the CPU
    y[i] = v;
  }
}

template <typename T>
__global__ void bias_grad_kernel(const T* dy, T* db, std::int64_t n, std::int64_t k,
                                 std::int64_t pq) {
  const std::int64_t kk = blockIdx.x;
  double acc = 0.0;
  for (std::int64_t j = threadIdx.x; j < n * pq; j += blockDim.x) {
    const std::int64_t s = j / pq, o = j % pq;
    acc += static_cast<double>(dy[(s * k + kk) * pq + o]);
  }
  acc = block_allreduce(acc, SumOp{}, 0.0);
  if (threadIdx.x == 0) db[kk] = static_cast<T>(acc);
}

}  // namespace

void im2col(cudaStream_t stream, DType dtype, const void* x, void* col, const Im2colGeometry& g) {
  const std::int64_t total = g.cg * g.r * g.s * g.p * g.q;
  if (total == 0) return;
  const unsigned blocks = blocks_for(total, kThreads);
  if (dtype == DType::f64)
    im2col_kernel<double><<<blocks, kThreads, 0, stream>>>(static_cast<const double*>(x),
                                                           static_cast<double*>(col), g);
  else
    im2col_kernel<float><<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(x),
                                                          static_cast<float*>(col), g);
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

void col2im(cudaStream_t stream, DType dtype, const void* col, void* dx, const Im2colGeometry& g) {
  const std::int64_t total = g.cg * g.h * g.w;
  if (total == 0) return;
  const unsigned blocks = blocks_for(total, kThreads);
  if (dtype == DType::f64)
    col2im_kernel<double><<<blocks, kThreads, 0, stream>>>(static_cast<const double*>(col),
                                                           static_cast<double*>(dx), g);
  else
    col2im_kernel<float><<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(col),
                                                          static_cast<float*>(dx), g);
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

void bias_relu(cudaStream_t stream, DType dtype, void* y, const void* b, std::int64_t n,
               std::int64_t k, std::int64_t pq, bool relu) {
  const std::int64_t total = n * k * pq;
  if (total == 0 || (b == nullptr && !relu)) return;
  const unsigned blocks = blocks_for(total, kThreads);
  if (dtype == DType::f64)
    bias_relu_kernel<double><<<blocks, kThreads, 0, stream>>>(
        static_cast<double*>(y), static_cast<const double*>(b), total, k, pq, relu);
  else
    bias_relu_kernel<float><<<blocks, kThreads, 0, stream>>>(
        static_cast<float*>(y), static_cast<const float*>(b), total, k, pq, relu);
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

void bias_grad(cudaStream_t stream, DType dtype, const void* dy, void* db, std::int64_t n,
               std::int64_t k, std::int64_t pq) {
  if (k == 0) return;
  ANVIL_CHECK(k <= 2147483647LL, "bias_grad", "too many channels: ", k);
  const unsigned blocks = static_cast<unsigned>(k);
  if (dtype == DType::f64)
    bias_grad_kernel<double><<<blocks, kThreads, 0, stream>>>(static_cast<const double*>(dy),
                                                              static_cast<double*>(db), n, k, pq);
  else
    bias_grad_kernel<float><<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(dy),
                                                             static_cast<float*>(db), n, k, pq);
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace anvil::cuda
