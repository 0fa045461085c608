// SPDX-License-Identifier: Apache-2.0
// `cuda.custom` pooling: max (int32 index ih*W + iw per output), average (count_include_pad,
// ceil mode) and adaptive average, forward and backward, f32/f64, dense NCHW planes.
// Forward: one thread per output element walks its window in row-major order (sums in double).
// Backward: one thread per input element gathers, in ascending output order, the outputs whose
// window holds it (Note [Gathered pool backward]). The per-element work is in pool_window.h
// (host-and-device code, tested on the CPU); grid-stride loops in int64; nothing is launched for
// an empty output or input.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/pointwise_geometry.cuh"
#include "kernels/cuda/pool_kernels.h"
#include "kernels/cuda/pool_window.h"

namespace anvil::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(256)
    pool_forward_kernel(PoolGeometry g, const T* x, T* y, std::int32_t* index) {
  const std::int64_t total = g.planes * g.oh * g.ow;
  for (std::int64_t o = global_thread(); o < total; o += grid_threads())
    pool_detail::forward_element(g, x, y, index, o, -device_inf<T>());
}

// Note [Gathered pool backward] (pool_window.h): no atomics, ref's order and rounding.
template <typename T>
__global__ void __launch_bounds__(256)
    pool_backward_kernel(PoolGeometry g, const T* dy, T* dx, const std::int32_t* index) {
  const std::int64_t total = g.planes * g.h * g.w;
  for (std::int64_t e = global_thread(); e < total; e += grid_threads())
    pool_detail::backward_element(g, dy, dx, index, e);
}

void check(const char* where, DType dtype, const PoolGeometry& g) {
  ANVIL_CHECK(dtype == DType::f32 || dtype == DType::f64, where, "needs f32 or f64, got ",
              dtype_name(dtype));
  ANVIL_CHECK(g.planes >= 0 && g.h >= 0 && g.w >= 0 && g.oh >= 0 && g.ow >= 0, where,
              "negative extent (planes ", g.planes, ", H ", g.h, ", W ", g.w, ", OH ", g.oh,
              ", OW ", g.ow, ")");
  ANVIL_CHECK(g.kind == PoolCode::adaptive_avg || (g.sh > 0 && g.sw > 0), where,
              "stride must be positive, got ", g.sh, "x", g.sw);
}

}  // namespace

void pool_forward(cudaStream_t stream, DType dtype, const PoolGeometry& g, const void* x, void* y,
                  std::int32_t* index) {
  check("pool_forward", dtype, g);
  const std::int64_t total = g.planes * g.oh * g.ow;
  if (total == 0) return;  // never a 0-block grid
  ANVIL_CHECK(g.h > 0 && g.w > 0 && x != nullptr && y != nullptr, "pool_forward",
              "empty input plane or null pointer (x ", x, ", y ", y, ")");
  const unsigned blocks = blocks_for(total, kThreads);
  if (dtype == DType::f64)
    pool_forward_kernel<double><<<blocks, kThreads, 0, stream>>>(g, static_cast<const double*>(x),
                                                                 static_cast<double*>(y), index);
  else
    pool_forward_kernel<float><<<blocks, kThreads, 0, stream>>>(g, static_cast<const float*>(x),
                                                                static_cast<float*>(y), index);
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

void pool_backward(cudaStream_t stream, DType dtype, const PoolGeometry& g, const void* dy,
                   void* dx, const std::int32_t* index) {
  check("pool_backward", dtype, g);
  const std::int64_t total = g.planes * g.h * g.w;
  if (total == 0) return;
  ANVIL_CHECK(dx != nullptr, "pool_backward", "null dx");
  if (g.oh * g.ow == 0) {  // no output: the gradient is zero
    ANVIL_CUDA_CHECK(
        cudaMemsetAsync(dx, 0, static_cast<std::size_t>(total) * dtype_size(dtype), stream));
    return;
  }
  ANVIL_CHECK(dy != nullptr && (g.kind != PoolCode::max || index != nullptr), "pool_backward",
              "null pointer (dy ", dy, ", index ", static_cast<const void*>(index), ")");
  const unsigned blocks = blocks_for(total, kThreads);
  if (dtype == DType::f64)
    pool_backward_kernel<double><<<blocks, kThreads, 0, stream>>>(g, static_cast<const double*>(dy),
                                                                  static_cast<double*>(dx), index);
  else
    pool_backward_kernel<float><<<blocks, kThreads, 0, stream>>>(g, static_cast<const float*>(dy),
                                                                 static_cast<float*>(dx), index);
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace anvil::cuda
