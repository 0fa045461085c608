// SPDX-License-Identifier: Apache-2.0
// `cuda.custom.softmax`: row-wise softmax / log-softmax, their backward, and the fused softmax
// cross-entropy forward (per-row loss and log-sum-exp) and backward, f32/f64, over dense
// [rows, cols] buffers. One warp per row when cols <= kWarpRowMax, else one block per row
// (pointwise_geometry.cuh: WarpGroup / BlockGroup). Max-subtracted: lse = m + log(sum exp(x - m)),
// exp in T, sums in double; conventions as on the CPU: +inf in a row gives lse = +inf, a NaN
// gives NaN, an all -inf row gives -inf.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_error_report.cuh"
#include "kernels/cuda/host_waits.h"
#include "kernels/cuda/pointwise_geometry.cuh"
#include "kernels/cuda/softmax_kernels.h"
#include "kernels/value_index_types.h"

namespace anvil::cuda {
namespace {

__device__ __forceinline__ float m_exp(float x) { return expf(x); }
__device__ __forceinline__ double m_exp(double x) { return exp(x); }

// log-sum-exp of one row, every member of the group gets it.
template <typename T, typename G>
__device__ T row_lse(const G& g, const T* xr, std::int64_t cols) {
  const T inf = device_inf<T>();
  T m = -inf;
  for (std::int64_t c = g.lane(); c < cols; c += g.size()) m = xr[c] > m ? xr[c] : m;  // skips NaN
  m = g.allreduce(m, MaxOp{}, -inf);
  if (m == inf) return m;
  // All -inf: sum exp(x) is 0 (lse -inf) or NaN when the row has a NaN.
  const T shift = m == -inf ? T(0) : m;
  double s = 0.0;
  for (std::int64_t c = g.lane(); c < cols; c += g.size())
    s += static_cast<double>(m_exp(xr[c] - shift));
  s = g.allreduce(s, SumOp{}, 0.0);
  return static_cast<T>(static_cast<double>(shift) + ::log(s));
}

template <typename T, typename G>
__global__ void __launch_bounds__(512)
    softmax_fwd(const T* x, T* y, std::int64_t rows, std::int64_t cols, bool log) {
  const G g;
  for (std::int64_t row = g.index(); row < rows; row += g.count()) {  // uniform per group
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    const T lse = row_lse<T>(g, xr, cols);
    for (std::int64_t c = g.lane(); c < cols; c += g.size())
      yr[c] = log ? xr[c] - lse : m_exp(xr[c] - lse);
  }
}

template <typename T, typename G>
__global__ void __launch_bounds__(512)
    softmax_bwd(const T* y, const T* dy, T* dx, std::int64_t rows, std::int64_t cols, bool log) {
  const G g;
  for (std::int64_t row = g.index(); row < rows; row += g.count()) {
    const T* yr = y + row * cols;
    const T* gr = dy + row * cols;
    T* dr = dx + row * cols;
    double dot = 0.0;
    for (std::int64_t c = g.lane(); c < cols; c += g.size())
      dot += log ? static_cast<double>(gr[c]) : static_cast<double>(gr[c]) * yr[c];
    const T s = static_cast<T>(g.allreduce(dot, SumOp{}, 0.0));
    for (std::int64_t c = g.lane(); c < cols; c += g.size())
      dr[c] = log ? gr[c] - m_exp(yr[c]) * s : yr[c] * (gr[c] - s);
  }
}

template <typename T, typename I, typename G>
__global__ void __launch_bounds__(512)
    ce_fwd(const T* x, const I* target, T* loss, T* lse, std::int64_t rows, std::int64_t cols,
           unsigned long long* bad_row) {
  const G g;
  for (std::int64_t row = g.index(); row < rows; row += g.count()) {
    const T* xr = x + row * cols;
    const T l = row_lse<T>(g, xr, cols);
    if (g.lane() == 0) {
      const std::int64_t t = static_cast<std::int64_t>(target[row]);
      lse[row] = l;
      if (t >= 0 && t < cols) {
        loss[row] = l - xr[t];
      } else {
        loss[row] = device_nan<T>();
        atomicMin(bad_row, static_cast<unsigned long long>(row));
      }
    }
  }
}

template <typename T, typename I, typename G>
__global__ void __launch_bounds__(512)
    ce_bwd(const T* x, const I* target, const T* lse, T* dx, std::int64_t rows, std::int64_t cols,
           T scale_host, const T* scale_device) {
  const G g;
  // The incoming gradient of a mean loss, read on the device (no host readback per step).
  const T scale = scale_device != nullptr ? scale_host * *scale_device : scale_host;
  for (std::int64_t row = g.index(); row < rows; row += g.count()) {
    const T* xr = x + row * cols;
    T* dr = dx + row * cols;
    const T l = lse[row];
    const std::int64_t t = static_cast<std::int64_t>(target[row]);
    for (std::int64_t c = g.lane(); c < cols; c += g.size())
      dr[c] = scale * m_exp(xr[c] - l) - (c == t ? scale : T(0));
  }
}

// Launches kernel<WarpGroup> or kernel<BlockGroup> for `rows` rows of `cols`; `launch` gets
// (grid, block, group tag).
template <typename Launch>
void for_rows(std::int64_t rows, std::int64_t cols, Launch&& launch) {
  if (cols <= kWarpRowMax)
    launch(blocks_for(rows, kThreads / 32), kThreads, WarpGroup{});
  else
    launch(blocks_for(rows, 1), row_block_threads(cols), BlockGroup{});
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

void check_float(const char* where, DType dtype, std::int64_t rows, std::int64_t cols) {
  ANVIL_CHECK(dtype == DType::f32 || dtype == DType::f64, where, "needs f32 or f64, got ",
              dtype_name(dtype));
  ANVIL_CHECK(rows >= 0 && cols >= 0, where, "negative extent [rows=", rows, ", cols=", cols, "]");
}
void check_index(const char* where, DType index_dtype) {
  ANVIL_CHECK(index_dtype == DType::i32 || index_dtype == DType::i64, where,
              "expected class ids of dtype i32 or i64, got ", dtype_name(index_dtype));
}

}  // namespace

void softmax_rows(cudaStream_t stream, DType dtype, const void* x, void* y, std::int64_t rows,
                  std::int64_t cols, bool log) {
  check_float("softmax_rows", dtype, rows, cols);
  if (rows == 0 || cols == 0) return;
  visit_floating(dtype, [&](auto zero) {
    using T = decltype(zero);
    for_rows(rows, cols, [&](unsigned grid, int block, auto tag) {
      softmax_fwd<T, decltype(tag)><<<grid, block, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), rows, cols, log);
    });
  });
}

void softmax_backward_rows(cudaStream_t stream, DType dtype, const void* y, const void* dy,
                           void* dx, std::int64_t rows, std::int64_t cols, bool log) {
  check_float("softmax_backward_rows", dtype, rows, cols);
  if (rows == 0 || cols == 0) return;
  visit_floating(dtype, [&](auto zero) {
    using T = decltype(zero);
    for_rows(rows, cols, [&](unsigned grid, int block, auto tag) {
      softmax_bwd<T, decltype(tag)>
          <<<grid, block, 0, stream>>>(static_cast<const T*>(y), static_cast<const T*>(dy),
                                       static_cast<T*>(dx), rows, cols, log);
    });
  });
}

void cross_entropy_forward(cudaStream_t stream, DType dtype, DType index_dtype, const void* x,
                           const void* target, void* loss, void* lse, std::int64_t rows,
                           std::int64_t cols, void* flag, DeviceErrorRecord* record) {
  check_float("cross_entropy_forward", dtype, rows, cols);
  check_index("cross_entropy_forward", index_dtype);
  if (rows == 0) return;
  ANVIL_CHECK(flag != nullptr && record != nullptr, "cross_entropy_forward",
              "null flag buffer or error record");
  auto* bad = static_cast<unsigned long long*>(flag);
  ANVIL_CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(unsigned long long), stream));  // "none"
  kernels::visit_value_and_index(dtype, index_dtype, [&](auto zero, auto izero) {
    using T = decltype(zero);
    using I = decltype(izero);
    for_rows(rows, cols, [&](unsigned grid, int block, auto tag) {
      ce_fwd<T, I, decltype(tag)><<<grid, block, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const I*>(target), static_cast<T*>(loss),
          static_cast<T*>(lse), rows, cols, bad);
    });
    // The first bad row of this call (if any) to the device's error record.
    report_bad_id<I><<<1, 1, 0, stream>>>(bad, static_cast<const I*>(target), cols,
                                          kDeviceErrorCrossEntropyTarget, record);
  });
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

void cross_entropy_backward(cudaStream_t stream, DType dtype, DType index_dtype, const void* x,
                            const void* target, const void* lse, void* dx, std::int64_t rows,
                            std::int64_t cols, double scale, const void* scale_device) {
  check_float("cross_entropy_backward", dtype, rows, cols);
  check_index("cross_entropy_backward", index_dtype);
  if (rows == 0 || cols == 0) return;
  kernels::visit_value_and_index(dtype, index_dtype, [&](auto zero, auto izero) {
    using T = decltype(zero);
    using I = decltype(izero);
    for_rows(rows, cols, [&](unsigned grid, int block, auto tag) {
      ce_bwd<T, I, decltype(tag)>
          <<<grid, block, 0, stream>>>(static_cast<const T*>(x), static_cast<const I*>(target),
                                       static_cast<const T*>(lse), static_cast<T*>(dx), rows, cols,
                                       static_cast<T>(scale), static_cast<const T*>(scale_device));
    });
  });
}

}  // namespace anvil::cuda
