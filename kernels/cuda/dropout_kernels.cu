// SPDX-License-Identifier: Apache-2.0
// Dropout forward on the GPU (variant cuda.custom.dropout; launcher in dropout_kernels.h):
// y[i] = x[i] * mask[i], mask[i] = keep ? scale : 0. One thread per group of four elements, a
// grid-stride loop over groups: group g draws the four Philox words of counter (g, offset) and
// element 4g + j uses word j, exactly as the host `ref` variant (kernels/dropout_philox.h).
// Dense f32/f64 buffers; the backward is an elementwise multiply by the saved mask.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dropout_kernels.h"
#include "kernels/dropout_philox.h"

namespace anvil::cuda {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 65535;

template <typename T>
__global__ void dropout_kernel(const T* __restrict__ x, T* __restrict__ y, T* __restrict__ mask,
                               std::int64_t n, std::uint64_t seed, std::uint64_t offset,
                               std::uint64_t threshold, T scale) {
  const std::int64_t groups = (n + 3) / 4;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       g < groups; g += stride) {
    const kernels::Philox4 w = kernels::dropout_words(static_cast<std::uint64_t>(g), seed, offset);
    const std::int64_t base = 4 * g;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const std::int64_t i = base + j;
      if (i < n) {
        const T m = static_cast<std::uint64_t>(w.x[j]) < threshold ? scale : T(0);
        mask[i] = m;
        y[i] = x[i] * m;
      }
    }
  }
}

template <typename T>
void launch(cudaStream_t stream, const void* x, void* y, void* mask, std::int64_t n,
            std::uint64_t seed, std::uint64_t offset, std::uint64_t threshold, double scale) {
  const std::int64_t groups = (n + 3) / 4;
  const int blocks =
      static_cast<int>(std::min<std::int64_t>((groups + kThreads - 1) / kThreads, kMaxBlocks));
  dropout_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                     static_cast<T*>(mask), n, seed, offset,
                                                     threshold, static_cast<T>(scale));
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void dropout_forward(cudaStream_t stream, DType dtype, const void* x, void* y, void* mask,
                     std::int64_t n, std::uint64_t seed, std::uint64_t offset,
                     std::uint64_t keep_threshold, double scale) {
  ANVIL_CHECK(dtype == DType::f32 || dtype == DType::f64, "dropout_forward",
              "needs f32 or f64, got ", dtype_name(dtype));
  ANVIL_CHECK(n >= 0, "dropout_forward", "negative element count ", n);
  if (n == 0) return;
  ANVIL_CHECK(x != nullptr && y != nullptr && mask != nullptr, "dropout_forward", "null buffer (x ",
              x, ", y ", y, ", mask ", mask, ") for ", n, " elements");
  if (dtype == DType::f64)
    launch<double>(stream, x, y, mask, n, seed, offset, keep_threshold, scale);
  else
    launch<float>(stream, x, y, mask, n, seed, offset, keep_threshold, scale);
}

}  // namespace anvil::cuda
