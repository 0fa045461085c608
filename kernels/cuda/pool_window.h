// SPDX-License-Identifier: Apache-2.0
#pragma once
// The per-element work of the `cuda.custom` pooling kernels (pool_kernels.cu): one output of the
// forward, one input element of the gathering backward, for max / average / adaptive average
// over dense NCHW planes. Plain C++17 that nvcc compiles as __host__ __device__ code and g++ as
// host code, so tests/test_cuda_pool_kernel_logic.cpp runs exactly these functions on the CPU
// against `ref`, without a GPU. No CUDA header here.
#include <cstdint>

#if defined(__CUDACC__)
#define ANVIL_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ANVIL_HOST_DEVICE inline
#endif

namespace anvil::cuda {

enum class PoolCode : int { max, avg, adaptive_avg };

// The geometry of engine/dispatch/pool_problem.h, flattened to N*C planes.
struct PoolGeometry {
  PoolCode kind = PoolCode::max;
  std::int64_t planes = 0;  // N * C
  std::int64_t h = 0, w = 0, oh = 0, ow = 0;
  std::int64_t kh = 0, kw = 0, sh = 0, sw = 0, ph = 0, pw = 0;  // unused for adaptive_avg
  bool count_include_pad = true;                                // avg only
};

namespace pool_detail {

// Note [Gathered pool backward]
// `ref` zeroes dx and then, output by output in ascending order, adds dy (max: at the saved
// index; average: dy / divisor rounded to T, at every element of the window) in T. A scatter
// with atomics would add in a random order (f32 results then differ from run to run). Here each
// input element sums its own contributions in that same ascending order, in T, so the result is
// ref's bit for bit, deterministic, and without atomics. Candidate output rows of input row ih are
// [ (ih + PH - KH) / SH , (ih + PH) / SH ] (adaptive: floor(ih * OH / H) - 1 ..
// ceil((ih + 1) * OH / H)); every candidate is checked with the window itself, so a loose range
// is harmless, a too narrow one is not (the CPU test checks thousands of random geometries).

ANVIL_HOST_DEVICE std::int64_t lo(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
ANVIL_HOST_DEVICE std::int64_t hi(std::int64_t a, std::int64_t b) { return a > b ? a : b; }

// The window of output (i, j), clipped to the input, and the average's divisor: the arithmetic
// of window_of() in kernels/cpu/ref/pool_ref.cpp (Note [Pool output size]).
struct Win {
  std::int64_t h0, h1, w0, w1;
  double divisor;
};

ANVIL_HOST_DEVICE Win window_of(const PoolGeometry& g, std::int64_t i, std::int64_t j) {
  Win win;
  if (g.kind == PoolCode::adaptive_avg) {
    win.h0 = (i * g.h) / g.oh;
    win.h1 = ((i + 1) * g.h + g.oh - 1) / g.oh;
    win.w0 = (j * g.w) / g.ow;
    win.w1 = ((j + 1) * g.w + g.ow - 1) / g.ow;
    win.divisor = static_cast<double>((win.h1 - win.h0) * (win.w1 - win.w0));
    return win;
  }
  std::int64_t h0 = i * g.sh - g.ph, w0 = j * g.sw - g.pw;
  std::int64_t h1 = lo(h0 + g.kh, g.h + g.ph), w1 = lo(w0 + g.kw, g.w + g.pw);
  const double padded = static_cast<double>((h1 - h0) * (w1 - w0));
  h0 = hi(h0, 0);
  w0 = hi(w0, 0);
  h1 = lo(h1, g.h);
  w1 = lo(w1, g.w);
  win.h0 = h0;
  win.h1 = h1;
  win.w0 = w0;
  win.w1 = w1;
  win.divisor = g.count_include_pad ? padded : static_cast<double>((h1 - h0) * (w1 - w0));
  return win;
}

// Output o (flat over [planes, OH, OW]) of the forward. Max: the first maximum in row-major
// window order, except that a NaN always wins, the last one in window order (as ref and PyTorch:
// Note [NaN propagation]); starts from neg_inf = -infinity, so a window of only -inf gives -inf
// at its first element; index (may be null) gets ih*W + iw.
template <typename T>
ANVIL_HOST_DEVICE void forward_element(const PoolGeometry& g, const T* x, T* y, std::int32_t* index,
                                       std::int64_t o, T neg_inf) {
  const std::int64_t j = o % g.ow, i = (o / g.ow) % g.oh, pl = o / (g.ow * g.oh);
  const T* xp = x + pl * g.h * g.w;
  const Win win = window_of(g, i, j);
  if (g.kind == PoolCode::max) {
    T best = neg_inf;
    std::int64_t at = win.h0 * g.w + win.w0;
    for (std::int64_t h = win.h0; h < win.h1; ++h)
      for (std::int64_t w = win.w0; w < win.w1; ++w) {
        const T v = xp[h * g.w + w];
        if (v > best || v != v) {
          best = v;
          at = h * g.w + w;
        }
      }
    y[o] = best;
    if (index != nullptr) index[o] = static_cast<std::int32_t>(at);
    return;
  }
  double s = 0.0;
  for (std::int64_t h = win.h0; h < win.h1; ++h)
    for (std::int64_t w = win.w0; w < win.w1; ++w) s += static_cast<double>(xp[h * g.w + w]);
  y[o] = static_cast<T>(s / win.divisor);
}

// First / last candidate output row (or column) whose window may hold input row ih.
ANVIL_HOST_DEVICE std::int64_t first_candidate(std::int64_t ih, std::int64_t in, std::int64_t out,
                                               std::int64_t k, std::int64_t s, std::int64_t p,
                                               bool adaptive) {
  return hi(adaptive ? (ih * out) / in - 1 : (ih + p - k) / s, 0);
}
ANVIL_HOST_DEVICE std::int64_t last_candidate(std::int64_t ih, std::int64_t in, std::int64_t out,
                                              std::int64_t s, std::int64_t p, bool adaptive) {
  return lo(adaptive ? ((ih + 1) * out + in - 1) / in : (ih + p) / s, out - 1);
}

// Input element e (flat over [planes, H, W]) of the backward (Note [Gathered pool backward]).
template <typename T>
ANVIL_HOST_DEVICE void backward_element(const PoolGeometry& g, const T* dy, T* dx,
                                        const std::int32_t* index, std::int64_t e) {
  const bool adaptive = g.kind == PoolCode::adaptive_avg;
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

}  // namespace pool_detail
}  // namespace anvil::cuda
