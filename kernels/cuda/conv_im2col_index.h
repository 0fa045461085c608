// SPDX-License-Identifier: Apache-2.0
#pragma once
// The index arithmetic of cuda.custom.im2col's kernels (conv_im2col_kernels.cu), as functions
// that compile for the device and for the host, so that the CPU tests (tests/test_im2col_index.cpp)
// check it against `ref` without a GPU. No CUDA header: ANVIL_HD is __host__ __device__ under
// nvcc and nothing elsewhere. NCHW, one sample and one group: x [Cg, H, W], col [Cg * R * S, P * Q]
// (row (c * R + r) * S + s, column p * Q + q).
#include <cstdint>

#if defined(__CUDACC__)
#define ANVIL_HD __host__ __device__
#else
#define ANVIL_HD
#endif

namespace anvil::cuda {

struct Im2colGeometry {
  std::int64_t cg = 0, h = 0, w = 0;  // channels of one group, input size
  std::int64_t r = 0, s = 0, p = 0, q = 0;
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
};

// col[i], i < Cg * R * S * P * Q: the input element the filter tap reads, 0 in the padding.
template <typename T>
ANVIL_HD inline T im2col_value(const T* x, const Im2colGeometry& g, std::int64_t i) {
  const std::int64_t pq = g.p * g.q, row = i / pq, o = i % pq;
  const std::int64_t c = row / (g.r * g.s), rs = row % (g.r * g.s);
  const std::int64_t r = rs / g.s, s = rs % g.s, p = o / g.q, q = o % g.q;
  const std::int64_t ih = p * g.stride_h - g.pad_h + r * g.dil_h;
  const std::int64_t iw = q * g.stride_w - g.pad_w + s * g.dil_w;
  return (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w) ? x[(c * g.h + ih) * g.w + iw] : T(0);
}

// dx[i], i < Cg * H * W: the sum of the col entries that read input element i (a gather: no
// atomics, the same order on every run).
template <typename T>
ANVIL_HD inline T col2im_value(const T* col, const Im2colGeometry& g, std::int64_t i) {
  const std::int64_t pq = g.p * g.q;
  const std::int64_t c = i / (g.h * g.w), hw = i % (g.h * g.w), ih = hw / g.w, iw = hw % g.w;
  T acc = 0;
  for (std::int64_t r = 0; r < g.r; ++r) {
    const std::int64_t ph = ih + g.pad_h - r * g.dil_h;  // = p * stride_h
    if (ph < 0 || ph % g.stride_h != 0) continue;
    const std::int64_t p = ph / g.stride_h;
    if (p >= g.p) continue;
    for (std::int64_t s = 0; s < g.s; ++s) {
      const std::int64_t qw = iw + g.pad_w - s * g.dil_w;
      if (qw < 0 || qw % g.stride_w != 0) continue;
      const std::int64_t q = qw / g.stride_w;
      if (q >= g.q) continue;
      acc += col[((c * g.r + r) * g.s + s) * pq + p * g.q + q];
    }
  }
  return acc;
}

}  // namespace anvil::cuda
