// SPDX-License-Identifier: Apache-2.0
// Strided copy with dtype conversion and strided fill of device memory (copy_kernels.h), for
// Tensor::copy_ / Tensor::fill_ on a CUDA tensor; every dtype pair of f32/f64/i32/i64/bf16/f16
// (the 16-bit types as cuda_bf16.h/cuda_fp16.h types, converted through double with RNE), up to
// kMaxDims dims after coalescing, any strides including 0 (broadcast sources: the bias add of
// linear is this kernel, Note [Linear layout]). Dense same-dtype copies are one
// cudaMemcpyAsync, dense zero fills one cudaMemsetAsync; other dense cases take a flat
// grid-stride kernel, the rest the N-d one (Note [CUDA pointwise geometry]).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "engine/core/dtype.h"
#include "kernels/cuda/copy_kernels.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/pointwise_geometry.cuh"

namespace anvil::cuda {
namespace {

// The device element type of a dtype's host type: CUDA's own 16-bit types for bf16/f16 (same
// layout as anvil::BFloat16/Float16, a bare 16-bit pattern), the host type otherwise.
template <typename T>
struct DeviceElement {
  using type = T;
};
template <>
struct DeviceElement<BFloat16> {
  using type = __nv_bfloat16;
};
template <>
struct DeviceElement<Float16> {
  using type = __half;
};
static_assert(sizeof(__nv_bfloat16) == sizeof(BFloat16) && sizeof(__half) == sizeof(Float16));

// One element converted as on the host (Note [Half storage types]): a 16-bit source widens to
// float exactly, a 16-bit destination rounds from double to nearest even (__double2bfloat16,
// __double2half), which equals the host's round-to-odd-then-RNE result.
template <typename D, typename S>
__device__ D convert_on_device(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (std::is_same_v<S, __nv_bfloat16>) {
    return convert_on_device<D>(__bfloat162float(s));
  } else if constexpr (std::is_same_v<S, __half>) {
    return convert_on_device<D>(__half2float(s));
  } else if constexpr (std::is_same_v<D, __nv_bfloat16>) {
    return __double2bfloat16(static_cast<double>(s));
  } else if constexpr (std::is_same_v<D, __half>) {
    return __double2half(static_cast<double>(s));
  } else {
    return static_cast<D>(s);
  }
}

template <typename D, typename S>
__global__ void copy_flat(D* __restrict__ dst, const S* __restrict__ src, std::int64_t n) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads())
    dst[i] = convert_on_device<D>(src[i]);
}

// Operand 0 = dst, 1 = src. dst and src must not overlap (as on the CPU).
template <typename D, typename S, typename IndexT>
__global__ void copy_strided(D* dst, const S* src, Geometry<2> g) {
  for (std::int64_t i = global_thread(); i < g.numel; i += grid_threads()) {
    std::int64_t off[2];
    offsets_of<2, IndexT>(g, static_cast<IndexT>(i), off);
    dst[off[0]] = convert_on_device<D>(src[off[1]]);
  }
}

template <typename T>
__global__ void fill_flat(T* dst, T value, std::int64_t n) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) dst[i] = value;
}

template <typename T, typename IndexT>
__global__ void fill_strided(T* dst, T value, Geometry<1> g) {
  for (std::int64_t i = global_thread(); i < g.numel; i += grid_threads()) {
    std::int64_t off[1];
    offsets_of<1, IndexT>(g, static_cast<IndexT>(i), off);
    dst[off[0]] = value;
  }
}

}  // namespace

void strided_copy(cudaStream_t stream, const std::int64_t* sizes, int ndim, DeviceOperand dst,
                  DeviceOperand src) {
  ANVIL_CHECK(ndim >= 0, "strided_copy", "negative ndim ", ndim);
  const std::int64_t* strides[2] = {dst.strides, src.strides};
  const Geometry<2> g = make_geometry<2>("strided_copy", sizes, ndim, strides);
  if (g.numel == 0) return;
  ANVIL_CHECK(dst.data != nullptr && src.data != nullptr, "strided_copy", "null pointer (dst ",
              dst.data, ", src ", src.data, ") for ", g.numel, " elements");
  if (g.dense() && dst.dtype == src.dtype) {
    if (dst.data == src.data) return;  // x.copy_(x)
    ANVIL_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data,
                                     static_cast<std::size_t>(g.numel) * dtype_size(dst.dtype),
                                     cudaMemcpyDeviceToDevice, stream));
    return;
  }
  const unsigned blocks = blocks_for(g.numel, kThreads);
  visit_all_dtypes(dst.dtype, [&](auto dzero) {
    visit_all_dtypes(src.dtype, [&](auto szero) {
      using D = typename DeviceElement<decltype(dzero)>::type;
      using S = typename DeviceElement<decltype(szero)>::type;
      D* d = static_cast<D*>(dst.data);
      const S* s = static_cast<const S*>(src.data);
      if (g.dense())
        copy_flat<D, S><<<blocks, kThreads, 0, stream>>>(d, s, g.numel);
      else if (g.small_index())
        copy_strided<D, S, std::uint32_t><<<blocks, kThreads, 0, stream>>>(d, s, g);
      else
        copy_strided<D, S, std::uint64_t><<<blocks, kThreads, 0, stream>>>(d, s, g);
    });
  });
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

void strided_fill(cudaStream_t stream, const std::int64_t* sizes, int ndim, DeviceOperand dst,
                  double value) {
  ANVIL_CHECK(ndim >= 0, "strided_fill", "negative ndim ", ndim);
  const std::int64_t* strides[1] = {dst.strides};
  const Geometry<1> g = make_geometry<1>("strided_fill", sizes, ndim, strides);
  if (g.numel == 0) return;
  ANVIL_CHECK(dst.data != nullptr, "strided_fill", "null pointer for ", g.numel, " elements");
  // +0.0 is all-zero bytes in every dtype (not -0.0: its sign bit is set in f32/f64).
  if (g.dense() && value == 0.0 && !std::signbit(value)) {
    ANVIL_CUDA_CHECK(cudaMemsetAsync(
        dst.data, 0, static_cast<std::size_t>(g.numel) * dtype_size(dst.dtype), stream));
    return;
  }
  const unsigned blocks = blocks_for(g.numel, kThreads);
  // The value is rounded on the host (bf16/f16: RNE, Note [Half storage types]); the kernels
  // only store its bits, so the host types serve as device types here.
  visit_all_dtypes(dst.dtype, [&](auto zero) {
    using T = decltype(zero);
    T* d = static_cast<T*>(dst.data);
    const T v = static_cast<T>(value);
    if (g.dense())
      fill_flat<T><<<blocks, kThreads, 0, stream>>>(d, v, g.numel);
    else if (g.small_index())
      fill_strided<T, std::uint32_t><<<blocks, kThreads, 0, stream>>>(d, v, g);
    else
      fill_strided<T, std::uint64_t><<<blocks, kThreads, 0, stream>>>(d, v, g);
  });
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace anvil::cuda
