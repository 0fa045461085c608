// SPDX-License-Identifier: Apache-2.0
#pragma once
// Shared device-side helpers of the custom pointwise kernels (copy_kernels.cu,
// elementwise_kernels.cu, reduce_kernels.cu, softmax_kernels.cu): the coalesced N-d geometry of
// strided operands, the element offsets of a linear index, launch sizes, warp/block reductions.
// Included only by .cu files (C++17, CUDA keywords).
//
// Note [CUDA pointwise geometry]
// Operands share one shape; each has its own strides in elements (0 for broadcast dims). As in
// Note [Dimension coalescing] (engine/core/strided_loop.h), size-1 dims are dropped and adjacent
// dims that are contiguous with each other in every operand are merged, outermost first, so a
// dense tensor of any rank becomes one dim and takes the flat kernels. At most kMaxDims dims may
// remain (an anvil::Error otherwise). Kernels walk linear indices with a grid-stride loop in
// int64; the per-dim div/mod runs in 32-bit when numel < 2^31 (fast), else in 64-bit, and the
// offsets are always accumulated in int64, so tensors above 2^31 elements are indexed correctly.
// Grids are capped at kMaxBlocks blocks (far below the 2^31-1 limit of gridDim.x): the loops
// cover the rest.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "engine/core/error.h"

namespace anvil::cuda {

inline constexpr int kMaxDims = 8;
inline constexpr int kThreads = 256;               // block size of the 1-D kernels
inline constexpr std::int64_t kMaxBlocks = 65536;  // grid cap (see the Note)

template <int N>
struct Geometry {
  int ndim = 0;  // after coalescing, >= 1
  std::int64_t numel = 0;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[N][kMaxDims] = {};

  // One dim with unit strides everywhere: the flat kernels apply.
  bool dense() const {
    if (ndim != 1) return false;
    for (int k = 0; k < N; ++k)
      if (strides[k][0] != 1) return false;
    return true;
  }
  bool small_index() const { return numel <= std::numeric_limits<std::int32_t>::max(); }
};

// The coalesced geometry of N operands of shape sizes[0..ndim) with strides[k][0..ndim).
template <int N>
Geometry<N> make_geometry(const char* where, const std::int64_t* sizes, int ndim,
                          const std::int64_t* const (&strides)[N]) {
  Geometry<N> g;
  g.numel = 1;
  for (int d = 0; d < ndim; ++d) {
    ANVIL_CHECK(sizes[d] >= 0, where, "negative size ", sizes[d], " in dim ", d);
    g.numel *= sizes[d];
  }
  if (g.numel == 0) return g;  // nothing to do; callers return early
  for (int d = 0; d < ndim; ++d) {
    if (sizes[d] == 1) continue;
    bool merge = g.ndim > 0;
    for (int k = 0; k < N && merge; ++k)
      merge = g.strides[k][g.ndim - 1] == strides[k][d] * sizes[d];
    if (merge) {
      g.sizes[g.ndim - 1] *= sizes[d];
      for (int k = 0; k < N; ++k) g.strides[k][g.ndim - 1] = strides[k][d];
      continue;
    }
    ANVIL_CHECK(g.ndim < kMaxDims, where, "more than ", kMaxDims,
                " dims remain after merging contiguous ones (", ndim, "-D operands)");
    g.sizes[g.ndim] = sizes[d];
    for (int k = 0; k < N; ++k) g.strides[k][g.ndim] = strides[k][d];
    ++g.ndim;
  }
  if (g.ndim == 0) {  // a single element
    g.ndim = 1;
    g.sizes[0] = 1;
    for (int k = 0; k < N; ++k) g.strides[k][0] = 1;
  }
  return g;
}

// Blocks for n independent items of `per_block` each, capped at kMaxBlocks (grid-stride loops).
inline unsigned blocks_for(std::int64_t n, std::int64_t per_block) {
  std::int64_t b = (n + per_block - 1) / per_block;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

// Element offsets of every operand at linear (row-major) index i < numel. IndexT is uint32_t
// when numel < 2^31, else uint64_t (Note [CUDA pointwise geometry]).
template <int N, typename IndexT>
__device__ __forceinline__ void offsets_of(const Geometry<N>& g, IndexT i, std::int64_t (&off)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
#pragma unroll
  for (int d = kMaxDims - 1; d >= 0; --d) {
    if (d < g.ndim) {
      const IndexT size = static_cast<IndexT>(g.sizes[d]);
      const IndexT q = i / size;
      const std::int64_t r = static_cast<std::int64_t>(i - q * size);
      i = q;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += r * g.strides[k][d];
    }
  }
}

__device__ __forceinline__ std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_threads() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// +inf and a quiet NaN of T in device code (std::numeric_limits is host-only under nvcc
// without --expt-relaxed-constexpr).
template <typename T>
__device__ __forceinline__ T device_inf();
template <>
__device__ __forceinline__ float device_inf<float>() {
  return __int_as_float(0x7f800000);
}
template <>
__device__ __forceinline__ double device_inf<double>() {
  return __longlong_as_double(0x7ff0000000000000LL);
}
template <typename T>
__device__ __forceinline__ T device_nan();
template <>
__device__ __forceinline__ float device_nan<float>() {
  return __int_as_float(0x7fc00000);
}
template <>
__device__ __forceinline__ double device_nan<double>() {
  return __longlong_as_double(0x7ff8000000000000LL);
}

// ---- reductions within a warp / a block ------------------------------------------------------

struct SumOp {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return a + b;
  }
};
// Max that never produces NaN from non-NaN partials (callers keep NaN out of the partials).
struct MaxOp {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return a > b ? a : b;
  }
};

// Every lane of the (full, converged) warp gets the reduction of the 32 values.
template <typename A, typename Op>
__device__ __forceinline__ A warp_allreduce(A v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Every thread of the block gets the reduction; blockDim.x must be a multiple of 32 and all
// threads must call it (it synchronises). Safe to call repeatedly: the first barrier keeps a
// call's writes of `smem` behind the previous call's reads.
template <typename A, typename Op>
__device__ __forceinline__ A block_allreduce(A v, Op op, A identity) {
  __shared__ A smem[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_allreduce(v, op);
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  A r = lane < warps ? smem[lane] : identity;
  return warp_allreduce(r, op);
}

// A group of threads that cooperates on one row: a warp (short rows) or a whole block (long
// rows). index()/count() enumerate the groups of the grid; reductions give every member the
// result. All members of a group run the same row loop, so the reductions are converged.
struct WarpGroup {
  __device__ std::int64_t index() const {
    return static_cast<std::int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  }
  __device__ std::int64_t count() const {
    return static_cast<std::int64_t>(gridDim.x) * (blockDim.x >> 5);
  }
  __device__ int lane() const { return threadIdx.x & 31; }
  __device__ int size() const { return 32; }
  template <typename A, typename Op>
  __device__ A allreduce(A v, Op op, A) const {
    return warp_allreduce(v, op);
  }
};
struct BlockGroup {
  __device__ std::int64_t index() const { return blockIdx.x; }
  __device__ std::int64_t count() const { return gridDim.x; }
  __device__ int lane() const { return threadIdx.x; }
  __device__ int size() const { return blockDim.x; }
  template <typename A, typename Op>
  __device__ A allreduce(A v, Op op, A identity) const {
    return block_allreduce(v, op, identity);
  }
};

// Rows up to this length take one warp each, longer ones one block.
inline constexpr std::int64_t kWarpRowMax = 1024;
// Threads of the block-per-row kernels for a row of `cols`.
inline int row_block_threads(std::int64_t cols) { return cols <= 4096 ? 256 : 512; }

}  // namespace anvil::cuda
