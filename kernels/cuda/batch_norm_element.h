// SPDX-License-Identifier: Apache-2.0
#pragma once
// The per-element work of the `cuda.custom` batch-norm kernels (batch_norm_kernels.cu): where
// the k-th value of channel c lives in dense NCHW x [N, C, HW], and ref's formulas for the
// normalised value and the input gradient (kernels/cpu/ref/batch_norm_ref.cpp), evaluated in
// double from the T-rounded mean and variance. Plain C++17 that nvcc compiles as
// __host__ __device__ code and g++ as host code, so tests/test_cuda_pool_kernel_logic.cpp runs
// these functions on the CPU against `ref`. No CUDA header here.
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define ANVIL_BN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ANVIL_BN_HOST_DEVICE inline
#endif

namespace anvil::cuda {

struct BnGeometry {
  std::int64_t n = 0, c = 0, hw = 0;
  double eps = 1e-5;
};

namespace bn_detail {

// Offset in x of value k (0 <= k < N*HW, plane by plane) of channel c.
ANVIL_BN_HOST_DEVICE std::int64_t channel_offset(const BnGeometry& g, std::int64_t c,
                                                 std::int64_t k) {
  const std::int64_t n = k / g.hw, i = k - n * g.hw;
  return (n * g.c + c) * g.hw + i;
}

ANVIL_BN_HOST_DEVICE double inv_std(double var, double eps) { return 1.0 / sqrt(var + eps); }

// y = (x - mean) * invstd * weight + bias.
ANVIL_BN_HOST_DEVICE double normalized(double x, double mu, double is, double wc, double bc) {
  return (x - mu) * is * wc + bc;
}

// One term of the backward's second sum: dy * xhat.
ANVIL_BN_HOST_DEVICE double dy_xhat(double d, double x, double mu, double is) {
  return d * (x - mu) * is;
}

// dx from dy (d), x, the statistics and the channel's two sums (sdy = sum dy,
// sdyx = sum dy * xhat) over m values; eval mode (batch_stats false): dy * weight * invstd.
ANVIL_BN_HOST_DEVICE double input_gradient(double d, double x, double mu, double is, double wc,
                                           double sdy, double sdyx, double m, bool batch_stats) {
  const double xhat = (x - mu) * is;
  return batch_stats ? wc * is * (d - sdy / m - xhat * sdyx / m) : wc * is * d;
}

}  // namespace bn_detail
}  // namespace anvil::cuda
