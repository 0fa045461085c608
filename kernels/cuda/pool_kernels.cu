// SPDX-License-Identifier: Apache-2.0
// `cuda.custom` pooling: max (int32 index ih*W + iw per output), average (count_include_pad,
// ceil mode) and adaptive average, forward and backward, f32/f64, dense NCHW planes.
// Forward: one thread per output element walks its window in row-major order (sums in double).
// Backward: one thread per input element gathers, in ascending output order, the outputs whose
// window holds it (Note [Gathered pool backward]). Grid-stride loops in int64; nothing is
// launched for an empty output or input.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/pointwise_geometry.cuh"
#include "kernels/cuda/pool_kernels.h"

namespace anvil::cuda {
namespace {

// Note [Gathered pool backward]
// `ref` zeroes dx and then, output by output in ascending order, adds dy (max: at the saved
// index; average: dy / divisor rounded to T, at every element of the window) in T. A scatter
// with atomics would add in a random order (f32 results then differ from run to run). Here each
// input element sums its own contributions in that same ascending order, in T, so the result is
// ref's bit for bit, deterministic, and without atomics. Candidate output rows of input row ih are
// [ (ih + PH - KH) / SH , (ih + PH) / SH ] (adaptive: from floor(ih * OH / H) on); every
// candidate is checked with the window function itself, so a loose range is harmless.

// The window of output (i, j), clipped to the input, and the average's divisor: the same
// arithmetic as window_of() in kernels/cpu/ref/pool_ref.cpp (Note [Pool output size]).
struct Win {
  std::int64_t h0, h1, w0, w1;
  double divisor;
};

__device__ __forceinline__ std::int64_t a_start(std::int64_t i, std::int64_t in, std::int64_t out) {
  return (i * in) / out;
}
__device__ __forceinline__ std::int64_t a_end(std::int64_t i, std::int64_t in, std::int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

__device__ __forceinline__ Win window_of(const PoolGeometry& g, std::int64_t i, std::int64_t j) {
  Win win;
  if (g.kind == PoolCode::adaptive_avg) {
    win.h0 = a_start(i, g.h, g.oh);
    win.h1 = a_end(i, g.h, g.oh);
    win.w0 = a_start(j, g.w, g.ow);
    win.w1 = a_end(j, g.w, g.ow);
    win.divisor = static_cast<double>((win.h1 - win.h0) * (win.w1 - win.w0));
    return win;
  }
  std::int64_t h0 = i * g.sh - g.ph, w0 = j * g.sw - g.pw;
  std::int64_t h1 = min(h0 + g.kh, g.h + g.ph), w1 = min(w0 + g.kw, g.w + g.pw);
  const double padded = static_cast<double>((h1 - h0) * (w1 - w0));
  h0 = max(h0, std::int64_t(0));
  w0 = max(w0, std::int64_t(0));
  h1 = min(h1, g.h);
  w1 = min(w1, g.w);
  win = {h0, h1, w0, w1, g.count_include_pad ? padded : static_cast<double>((h1 - h0) * (w1 - w0))};
  return win;
}

template <typename T>
__global__ void __launch_bounds__(256)
    pool_forward_kernel(PoolGeometry g, const T* x, T* y, std::int32_t* index) {
  const std::int64_t total = g.planes * g.oh * g.ow;
  for (std::int64_t o = global_thread(); o < total; o += grid_threads()) {
    const std::int64_t j = o % g.ow, i = (o / g.ow) % g.oh, pl = o / (g.ow * g.oh);
    const T* xp = x + pl * g.h * g.w;
    const Win win = window_of(g, i, j);
    if (g.kind == PoolCode::max) {
      T best = -device_inf<T>();
      std::int64_t at = win.h0 * g.w + win.w0;
      for (std::int64_t h = win.h0; h < win.h1; ++h)
        for (std::int64_t w = win.w0; w < win.w1; ++w) {
          const T v = xp[h * g.w + w];
          if (v > best) {  // NaN never compares greater; ties keep the first
            best = v;
            at = h * g.w + w;
          }
        }
      y[o] = best;
      if (index != nullptr) index[o] = static_cast<std::int32_t>(at);
    } else {
      double s = 0.0;
      for (std::int64_t h = win.h0; h < win.h1; ++h)
        for (std::int64_t w = win.w0; w < win.w1; ++w) s += static_cast<double>(xp[h * g.w + w]);
      y[o] = static_cast<T>(s / win.divisor);
    }
  }
}

// First candidate output row (or column) whose window may hold input row ih (see the Note).
__device__ __forceinline__ std::int64_t first_candidate(std::int64_t ih, std::int64_t in,
                                                        std::int64_t out, std::int64_t k,
                                                        std::int64_t s, std::int64_t p,
                                                        bool adaptive) {
  const std::int64_t lo = adaptive ? (ih * out) / in - 1 : (ih + p - k) / s;
  return lo > 0 ? lo : 0;
}
__device__ __forceinline__ std::int64_t last_candidate(std::int64_t ih, std::int64_t in,
                                                       std::int64_t out, std::int64_t s,
                                                       std::int64_t p, bool adaptive) {
  const std::int64_t hi = adaptive ? ((ih + 1) * out + in - 1) / in : (ih + p) / s;
  return hi < out - 1 ? hi : out - 1;
}

template <typename T>
__global__ void __launch_bounds__(256)
    pool_backward_kernel(PoolGeometry g, const T* dy, T* dx, const std::int32_t* index) {
  const std::int64_t total = g.planes * g.h * g.w;
  const bool adaptive = g.kind == PoolCode::adaptive_avg;
  for (std::int64_t e = global_thread(); e < total; e += grid_threads()) {
    const std::int64_t iw = e % g.w, ih = (e / g.w) % g.h, pl = e / (g.w * g.h);
    const std::int64_t at = ih * g.w + iw;
    const std::int64_t i0 = first_candidate(ih, g.h, g.oh, g.kh, g.sh, g.ph, adaptive),
                       i1 = last_candidate(ih, g.h, g.oh, g.sh, g.ph, adaptive),
                       j0 = first_candidate(iw, g.w, g.ow, g.kw, g.sw, g.pw, adaptive),
                       j1 = last_candidate(iw, g.w, g.ow, g.sw, g.pw, adaptive);
    const std::int64_t obase = pl * g.oh * g.ow;
    T acc = T(0);
    for (std::int64_t i = i0; i <= i1; ++i)
      for (std::int64_t j = j0; j <= j1; ++j) {
        const std::int64_t o = obase + i * g.ow + j;
        if (g.kind == PoolCode::max) {
          if (index[o] == at) acc += dy[o];
          continue;
        }
        const Win win = window_of(g, i, j);
        if (ih >= win.h0 && ih < win.h1 && iw >= win.w0 && iw < win.w1)
          acc += static_cast<T>(static_cast<double>(dy[o]) / win.divisor);
      }
    dx[e] = acc;
  }
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
