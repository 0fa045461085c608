// SPDX-License-Identifier: Apache-2.0
// `cuda.custom.reduce`: sum (mean = sum with a scale) and max with int64 indices over a
// contiguous x[outer, reduce, inner], f32/f64, sums accumulated in double.
//   inner == 1 (row reduce): one warp per row for rows up to kWarpRowMax, else one block.
//   inner  > 1 (column reduce, e.g. the bias gradient of [B, N] over B): a 32 x TY block per
//   tile of 32 adjacent columns of one outer slice; the 32 lanes read 32 consecutive elements
//   (coalesced), the TY rows of threads split the reduced extent, then combine in shared memory.
// Block sizes never exceed the kernels' __launch_bounds__ (registers are budgeted for them).
// Deterministic: no atomics, a fixed combination order for a given launch shape.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/pointwise_geometry.cuh"
#include "kernels/cuda/reduce_kernels.h"

namespace anvil::cuda {
namespace {

constexpr std::int64_t kNoIndex = std::numeric_limits<std::int64_t>::max();

// Should (v, i) replace the current best (bv, bi)? NaN beats numbers; then the larger value;
// ties (and two NaNs) go to the smaller index, so the result is the first max / first NaN,
// whatever order the partial results are combined in. The identity is (-inf, kNoIndex): any
// real element, even -inf, replaces it by its smaller index.
template <typename T>
__device__ __forceinline__ bool better(T bv, std::int64_t bi, T v, std::int64_t i) {
  const bool b_nan = bv != bv, v_nan = v != v;
  if (b_nan != v_nan) return v_nan;
  if (!v_nan && v != bv) return v > bv;
  return i < bi;
}

template <typename T>
__device__ __forceinline__ void warp_argmax(T& v, std::int64_t& i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const T ov = __shfl_xor_sync(0xffffffffu, v, o);
    const long long oi = __shfl_xor_sync(0xffffffffu, static_cast<long long>(i), o);
    if (better(v, i, ov, static_cast<std::int64_t>(oi))) {
      v = ov;
      i = oi;
    }
  }
}

// ---- inner == 1 ------------------------------------------------------------------------------

template <typename T, typename G>
__global__ void __launch_bounds__(512)
    row_sum(const T* x, T* out, std::int64_t rows, std::int64_t cols, double scale) {
  const G g;
  for (std::int64_t row = g.index(); row < rows; row += g.count()) {  // uniform per group
    const T* xr = x + row * cols;
    double acc = 0.0;
    for (std::int64_t c = g.lane(); c < cols; c += g.size()) acc += static_cast<double>(xr[c]);
    acc = g.allreduce(acc, SumOp{}, 0.0);
    if (g.lane() == 0) out[row] = static_cast<T>(acc * scale);
  }
}

template <typename T>
__global__ void __launch_bounds__(256)
    row_max_warp(const T* x, T* out, std::int64_t* index, std::int64_t rows, std::int64_t cols) {
  const WarpGroup g;
  for (std::int64_t row = g.index(); row < rows; row += g.count()) {
    const T* xr = x + row * cols;
    T bv = -device_inf<T>();
    std::int64_t bi = kNoIndex;
    for (std::int64_t c = g.lane(); c < cols; c += 32)
      if (better(bv, bi, xr[c], c)) {
        bv = xr[c];
        bi = c;
      }
    warp_argmax(bv, bi);
    if (g.lane() == 0) {
      out[row] = bv;
      index[row] = bi;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(512)
    row_max_block(const T* x, T* out, std::int64_t* index, std::int64_t rows, std::int64_t cols) {
  __shared__ T sv[32];
  __shared__ std::int64_t si[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {  // uniform per block
    const T* xr = x + row * cols;
    T bv = -device_inf<T>();
    std::int64_t bi = kNoIndex;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      if (better(bv, bi, xr[c], c)) {
        bv = xr[c];
        bi = c;
      }
    warp_argmax(bv, bi);
    __syncthreads();  // the previous row's readers are done with sv/si
    if (lane == 0) {
      sv[warp] = bv;
      si[warp] = bi;
    }
    __syncthreads();
    if (warp == 0) {
      bv = lane < warps ? sv[lane] : -device_inf<T>();
      bi = lane < warps ? si[lane] : kNoIndex;
      warp_argmax(bv, bi);
      if (lane == 0) {
        out[row] = bv;
        index[row] = bi;
      }
    }
  }
}

// ---- inner > 1 -------------------------------------------------------------------------------
// Block (32, TY): tile t covers outer slice o = t / chunks and columns [32 * (t % chunks), +32).

template <typename T>
__global__ void __launch_bounds__(1024)
    col_sum(const T* x, T* out, std::int64_t outer, std::int64_t reduce, std::int64_t inner,
            double scale) {
  __shared__ double part[32][33];  // [ty][tx], padded against bank conflicts
  const std::int64_t chunks = (inner + 31) / 32;
  for (std::int64_t t = blockIdx.x; t < outer * chunks; t += gridDim.x) {  // uniform per block
    const std::int64_t o = t / chunks, i = (t % chunks) * 32 + threadIdx.x;
    double acc = 0.0;
    if (i < inner) {
      const T* col = x + o * reduce * inner + i;
      for (std::int64_t r = threadIdx.y; r < reduce; r += blockDim.y)
        acc += static_cast<double>(col[r * inner]);
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && i < inner) {
      double s = 0.0;
      for (unsigned y = 0; y < blockDim.y; ++y) s += part[y][threadIdx.x];
      out[o * inner + i] = static_cast<T>(s * scale);
    }
    __syncthreads();  // part is rewritten by the next tile
  }
}

template <typename T>
__global__ void __launch_bounds__(1024)
    col_max(const T* x, T* out, std::int64_t* index, std::int64_t outer, std::int64_t reduce,
            std::int64_t inner) {
  __shared__ T pv[32][33];
  __shared__ std::int64_t pi[32][33];
  const std::int64_t chunks = (inner + 31) / 32;
  for (std::int64_t t = blockIdx.x; t < outer * chunks; t += gridDim.x) {
    const std::int64_t o = t / chunks, i = (t % chunks) * 32 + threadIdx.x;
    T bv = -device_inf<T>();
    std::int64_t bi = kNoIndex;
    if (i < inner) {
      const T* col = x + o * reduce * inner + i;
      for (std::int64_t r = threadIdx.y; r < reduce; r += blockDim.y)
        if (better(bv, bi, col[r * inner], r)) {
          bv = col[r * inner];
          bi = r;
        }
    }
    pv[threadIdx.y][threadIdx.x] = bv;
    pi[threadIdx.y][threadIdx.x] = bi;
    __syncthreads();
    if (threadIdx.y == 0 && i < inner) {
      for (unsigned y = 1; y < blockDim.y; ++y)
        if (better(bv, bi, pv[y][threadIdx.x], pi[y][threadIdx.x])) {
          bv = pv[y][threadIdx.x];
          bi = pi[y][threadIdx.x];
        }
      out[o * inner + i] = bv;
      index[o * inner + i] = bi;
    }
    __syncthreads();
  }
}

// Column tiles and the block shape: 32 x 8 when there are many tiles, 32 x 32 when there are
// few (a tall, narrow reduction still gets 32 threads per column).
dim3 col_block(std::int64_t tiles) { return dim3(32, tiles >= 512 ? 8 : 32); }

template <typename T>
void sum_typed(cudaStream_t stream, const T* x, T* out, std::int64_t outer, std::int64_t reduce,
               std::int64_t inner, double scale) {
  if (inner == 1) {
    if (reduce <= kWarpRowMax) {
      row_sum<T, WarpGroup>
          <<<blocks_for(outer, kThreads / 32), kThreads, 0, stream>>>(x, out, outer, reduce, scale);
    } else {
      const int threads = row_block_threads(reduce);
      row_sum<T, BlockGroup>
          <<<blocks_for(outer, 1), threads, 0, stream>>>(x, out, outer, reduce, scale);
    }
  } else {
    const std::int64_t tiles = outer * ((inner + 31) / 32);
    col_sum<T><<<blocks_for(tiles, 1), col_block(tiles), 0, stream>>>(x, out, outer, reduce, inner,
                                                                      scale);
  }
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void max_typed(cudaStream_t stream, const T* x, T* out, std::int64_t* index, std::int64_t outer,
               std::int64_t reduce, std::int64_t inner) {
  if (inner == 1) {
    if (reduce <= kWarpRowMax)
      row_max_warp<T>
          <<<blocks_for(outer, kThreads / 32), kThreads, 0, stream>>>(x, out, index, outer, reduce);
    else
      row_max_block<T><<<blocks_for(outer, 1), row_block_threads(reduce), 0, stream>>>(
          x, out, index, outer, reduce);
  } else {
    const std::int64_t tiles = outer * ((inner + 31) / 32);
    col_max<T><<<blocks_for(tiles, 1), col_block(tiles), 0, stream>>>(x, out, index, outer, reduce,
                                                                      inner);
  }
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

void check_args(const char* where, DType dtype, const void* x, const void* out, std::int64_t outer,
                std::int64_t reduce, std::int64_t inner) {
  ANVIL_CHECK(dtype == DType::f32 || dtype == DType::f64, where, "needs f32 or f64, got ",
              dtype_name(dtype));
  ANVIL_CHECK(outer >= 0 && reduce >= 0 && inner >= 0, where, "negative extent [outer=", outer,
              ", reduce=", reduce, ", inner=", inner, "]");
  ANVIL_CHECK(outer * inner == 0 || (out != nullptr && (reduce == 0 || x != nullptr)), where,
              "null pointer (x ", x, ", out ", out, ")");
}

}  // namespace

void reduce_sum(cudaStream_t stream, DType dtype, const void* x, void* out, std::int64_t outer,
                std::int64_t reduce, std::int64_t inner, double scale) {
  check_args("reduce_sum", dtype, x, out, outer, reduce, inner);
  if (outer * inner == 0) return;
  if (dtype == DType::f64)
    sum_typed(stream, static_cast<const double*>(x), static_cast<double*>(out), outer, reduce,
              inner, scale);
  else
    sum_typed(stream, static_cast<const float*>(x), static_cast<float*>(out), outer, reduce, inner,
              scale);
}

void reduce_max(cudaStream_t stream, DType dtype, const void* x, void* out, std::int64_t* index,
                std::int64_t outer, std::int64_t reduce, std::int64_t inner) {
  check_args("reduce_max", dtype, x, out, outer, reduce, inner);
  ANVIL_CHECK(reduce > 0, "reduce_max", "cannot take the max over an empty extent");
  if (outer * inner == 0) return;
  ANVIL_CHECK(index != nullptr, "reduce_max", "null index buffer");
  if (dtype == DType::f64)
    max_typed(stream, static_cast<const double*>(x), static_cast<double*>(out), index, outer,
              reduce, inner);
  else
    max_typed(stream, static_cast<const float*>(x), static_cast<float*>(out), index, outer, reduce,
              inner);
}

}  // namespace anvil::cuda
