// SPDX-License-Identifier: Apache-2.0
// `cuda.custom` batch norm, f32/f64, dense NCHW x [N, C, HW], vectors [C]:
//   statistics and the backward's two sums: one block per channel (grid-stride over channels)
//   walks the channel's N planes, accumulates in double, combines with block_allreduce
//   (deterministic: fixed order for a given launch shape);
//   normalisation and dx: one block per (n, c) plane, the per-channel scalars computed once per
//   thread, the plane's elements in a strided loop (coalesced).
// Formulas and rounding points as in kernels/cpu/ref/batch_norm_ref.cpp.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/batch_norm_element.h"
#include "kernels/cuda/batch_norm_kernels.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/pointwise_geometry.cuh"

namespace anvil::cuda {
namespace {

constexpr int kReduceThreads = 512;

using bn_detail::channel_offset;
using bn_detail::inv_std;

template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    stats_kernel(BnGeometry g, const T* x, T* mean, T* var) {
  const std::int64_t per = g.n * g.hw;
  const double m = static_cast<double>(per);
  for (std::int64_t c = blockIdx.x; c < g.c; c += gridDim.x) {  // uniform per block
    double s = 0.0;
    for (std::int64_t k = threadIdx.x; k < per; k += blockDim.x)
      s += static_cast<double>(x[channel_offset(g, c, k)]);
    const double mu = block_allreduce(s, SumOp{}, 0.0) / m;
    double s2 = 0.0;
    for (std::int64_t k = threadIdx.x; k < per; k += blockDim.x) {
      const double d = static_cast<double>(x[channel_offset(g, c, k)]) - mu;
      s2 += d * d;
    }
    s2 = block_allreduce(s2, SumOp{}, 0.0);
    if (threadIdx.x == 0) {
      mean[c] = static_cast<T>(mu);
      var[c] = static_cast<T>(s2 / m);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(256)
    normalize_kernel(BnGeometry g, const T* x, T* y, const T* weight, const T* bias, const T* mean,
                     const T* var) {
  for (std::int64_t pl = blockIdx.x; pl < g.n * g.c; pl += gridDim.x) {
    const std::int64_t c = pl % g.c;
    const double mu = static_cast<double>(mean[c]);
    const double is = inv_std(static_cast<double>(var[c]), g.eps);
    const double wc = static_cast<double>(weight[c]), bc = static_cast<double>(bias[c]);
    const T* xp = x + pl * g.hw;
    T* yp = y + pl * g.hw;
    for (std::int64_t i = threadIdx.x; i < g.hw; i += blockDim.x)
      yp[i] = static_cast<T>(bn_detail::normalized(static_cast<double>(xp[i]), mu, is, wc, bc));
  }
}

template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    backward_sums_kernel(BnGeometry g, const T* x, const T* dy, const T* mean, const T* var,
                         T* dweight, T* dbias, double* scratch) {
  const std::int64_t per = g.n * g.hw;
  for (std::int64_t c = blockIdx.x; c < g.c; c += gridDim.x) {
    const double mu = static_cast<double>(mean[c]);
    const double is = inv_std(static_cast<double>(var[c]), g.eps);
    double sdy = 0.0, sdyx = 0.0;
    for (std::int64_t k = threadIdx.x; k < per; k += blockDim.x) {
      const std::int64_t e = channel_offset(g, c, k);
      const double d = static_cast<double>(dy[e]);
      sdy += d;
      sdyx += bn_detail::dy_xhat(d, static_cast<double>(x[e]), mu, is);
    }
    sdy = block_allreduce(sdy, SumOp{}, 0.0);
    sdyx = block_allreduce(sdyx, SumOp{}, 0.0);
    if (threadIdx.x == 0) {
      dbias[c] = static_cast<T>(sdy);
      dweight[c] = static_cast<T>(sdyx);
      scratch[2 * c] = sdy;
      scratch[2 * c + 1] = sdyx;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(256)
    backward_dx_kernel(BnGeometry g, const T* x, const T* dy, const T* weight, const T* mean,
                       const T* var, T* dx, const double* scratch, bool batch_stats) {
  const double m = static_cast<double>(g.n * g.hw);
  for (std::int64_t pl = blockIdx.x; pl < g.n * g.c; pl += gridDim.x) {
    const std::int64_t c = pl % g.c;
    const double mu = static_cast<double>(mean[c]);
    const double is = inv_std(static_cast<double>(var[c]), g.eps);
    const double wc = static_cast<double>(weight[c]);
    const double sdy = scratch[2 * c], sdyx = scratch[2 * c + 1];
    const std::int64_t base = pl * g.hw;
    for (std::int64_t i = threadIdx.x; i < g.hw; i += blockDim.x)
      dx[base + i] = static_cast<T>(bn_detail::input_gradient(static_cast<double>(dy[base + i]),
                                                              static_cast<double>(x[base + i]), mu,
                                                              is, wc, sdy, sdyx, m, batch_stats));
  }
}

template <typename T>
__global__ void scale_kernel(T* v, std::int64_t count, double factor) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads())
    v[i] = static_cast<T>(static_cast<double>(v[i]) * factor);
}

template <typename T>
__global__ void inv_std_kernel(const T* var, T* out, std::int64_t count, double eps) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads())
    out[i] = static_cast<T>(inv_std(static_cast<double>(var[i]), eps));
}

// Threads of the per-plane kernels: the plane's size rounded up to a warp, at most 256.
int plane_threads(std::int64_t hw) {
  const std::int64_t t = (hw + 31) / 32 * 32;
  return static_cast<int>(t < 256 ? t : 256);
}

void check(const char* where, DType dtype, const BnGeometry& g) {
  ANVIL_CHECK(dtype == DType::f32 || dtype == DType::f64, where, "needs f32 or f64, got ",
              dtype_name(dtype));
  ANVIL_CHECK(g.n >= 0 && g.c >= 0 && g.hw >= 0, where, "negative extent (N ", g.n, ", C ", g.c,
              ", HW ", g.hw, ")");
}

template <typename F>
void dispatch(DType dtype, F&& f) {
  if (dtype == DType::f64)
    f(double{});
  else
    f(float{});
}

}  // namespace

void bn_stats(cudaStream_t stream, DType dtype, const BnGeometry& g, const void* x, void* mean,
              void* var) {
  check("bn_stats", dtype, g);
  if (g.n * g.c * g.hw == 0) return;  // never a 0-block grid (the op returns before, too)
  dispatch(dtype, [&](auto zero) {
    using T = decltype(zero);
    stats_kernel<T><<<blocks_for(g.c, 1), kReduceThreads, 0, stream>>>(
        g, static_cast<const T*>(x), static_cast<T*>(mean), static_cast<T*>(var));
  });
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

void bn_normalize(cudaStream_t stream, DType dtype, const BnGeometry& g, const void* x, void* y,
                  const void* weight, const void* bias, const void* mean, const void* var) {
  check("bn_normalize", dtype, g);
  if (g.n * g.c * g.hw == 0) return;
  dispatch(dtype, [&](auto zero) {
    using T = decltype(zero);
    normalize_kernel<T><<<blocks_for(g.n * g.c, 1), plane_threads(g.hw), 0, stream>>>(
        g, static_cast<const T*>(x), static_cast<T*>(y), static_cast<const T*>(weight),
        static_cast<const T*>(bias), static_cast<const T*>(mean), static_cast<const T*>(var));
  });
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

void bn_backward(cudaStream_t stream, DType dtype, const BnGeometry& g, const void* x,
                 const void* dy, const void* weight, const void* mean, const void* var, void* dx,
                 void* dweight, void* dbias, double* scratch, bool batch_stats) {
  check("bn_backward", dtype, g);
  if (g.n * g.c * g.hw == 0) return;
  ANVIL_CHECK(scratch != nullptr, "bn_backward", "null scratch");
  dispatch(dtype, [&](auto zero) {
    using T = decltype(zero);
    backward_sums_kernel<T><<<blocks_for(g.c, 1), kReduceThreads, 0, stream>>>(
        g, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<const T*>(mean),
        static_cast<const T*>(var), static_cast<T*>(dweight), static_cast<T*>(dbias), scratch);
    ANVIL_CUDA_CHECK(cudaGetLastError());
    backward_dx_kernel<T><<<blocks_for(g.n * g.c, 1), plane_threads(g.hw), 0, stream>>>(
        g, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<const T*>(weight),
        static_cast<const T*>(mean), static_cast<const T*>(var), static_cast<T*>(dx), scratch,
        batch_stats);
  });
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

void bn_scale_vector(cudaStream_t stream, DType dtype, void* v, std::int64_t count, double factor) {
  if (count <= 0) return;
  dispatch(dtype, [&](auto zero) {
    using T = decltype(zero);
    scale_kernel<T>
        <<<blocks_for(count, kThreads), kThreads, 0, stream>>>(static_cast<T*>(v), count, factor);
  });
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

void bn_inv_std(cudaStream_t stream, DType dtype, const void* var, void* invstd, std::int64_t count,
                double eps) {
  if (count <= 0) return;
  dispatch(dtype, [&](auto zero) {
    using T = decltype(zero);
    inv_std_kernel<T><<<blocks_for(count, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(var), static_cast<T*>(invstd), count, eps);
  });
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace anvil::cuda
