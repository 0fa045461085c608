// SPDX-License-Identifier: Apache-2.0
// Pointwise kernels of `cuda.custom.fused` and `cuda.custom.unfused` (the LSTM table): bias
// rows, the forward and backward cell of one time step (one fused kernel, or one launch per
// pointwise operation), and column sums for the bias gradient. Layout: gates [B, 4H] with the
// blocks i, f, g, o (PyTorch's order), states [B, H], dense row-major; f32 or f64.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/lstm_kernels.h"

namespace anvil::cuda {
namespace {

constexpr int kLstmThreads = 256;

unsigned blocks_for_n(std::int64_t n) {
  const std::int64_t b = (n + kLstmThreads - 1) / kLstmThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 32 ? 65535 * 32 : b));
}

__device__ __forceinline__ float d_exp(float x) { return expf(x); }
__device__ __forceinline__ double d_exp(double x) { return exp(x); }
__device__ __forceinline__ float d_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double d_tanh(double x) { return tanh(x); }
template <typename T>
__device__ __forceinline__ T d_sigmoid(T x) {
  return T(1) / (T(1) + d_exp(-x));
}

#define ANVIL_GRID_LOOP(i, n)                                                                      \
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void bias_rows_kernel(T* g, const T* b_ih, const T* b_hh, std::int64_t rows,
                                 std::int64_t h4) {
  ANVIL_GRID_LOOP(e, rows * h4) {
    const std::int64_t j = e % h4;
    g[e] = b_hh != nullptr ? b_ih[j] + b_hh[j] : b_ih[j];
  }
}

// ---- fused cell ----
template <typename T>
__global__ void cell_forward_fused(T* gates, const T* c_prev, T* c, T* h, std::int64_t B,
                                   std::int64_t H) {
  ANVIL_GRID_LOOP(e, B * H) {
    const std::int64_t b = e / H, j = e - b * H;
    T* g = gates + b * 4 * H;
    const T i = d_sigmoid(g[j]);
    const T f = d_sigmoid(g[H + j]);
    const T gg = d_tanh(g[2 * H + j]);
    const T o = d_sigmoid(g[3 * H + j]);
    g[j] = i;
    g[H + j] = f;
    g[2 * H + j] = gg;
    g[3 * H + j] = o;
    const T cp = c_prev != nullptr ? c_prev[e] : T(0);
    const T cn = f * cp + i * gg;
    c[e] = cn;
    h[e] = o * d_tanh(cn);
  }
}

template <typename T>
__global__ void cell_backward_fused(const T* gates, const T* c_prev, const T* c, const T* dy,
                                    const T* dh_next, const T* dc_next, T* dgates, T* dc_prev,
                                    std::int64_t B, std::int64_t H) {
  ANVIL_GRID_LOOP(e, B * H) {
    const std::int64_t b = e / H, j = e - b * H;
    const T* g = gates + b * 4 * H;
    T* dg = dgates + b * 4 * H;
    const T i = g[j], f = g[H + j], gg = g[2 * H + j], o = g[3 * H + j];
    const T tc = d_tanh(c[e]);
    const T dh = dy[e] + (dh_next != nullptr ? dh_next[e] : T(0));
    const T dct = (dc_next != nullptr ? dc_next[e] : T(0)) + dh * o * (T(1) - tc * tc);
    const T cp = c_prev != nullptr ? c_prev[e] : T(0);
    dg[j] = dct * gg * i * (T(1) - i);
    dg[H + j] = dct * cp * f * (T(1) - f);
    dg[2 * H + j] = dct * i * (T(1) - gg * gg);
    dg[3 * H + j] = dh * tc * o * (T(1) - o);
    dc_prev[e] = dct * f;
  }
}

// ---- unfused cell: one launch per operation (DLBench's "many small kernels") ----
enum class Op : int {
  sigmoid_block,  // gates[:, blk] = sigmoid(gates[:, blk])
  tanh_block,     // gates[:, blk] = tanh(gates[:, blk])
  c_forget,       // c = f * c_prev (0 without c_prev)
  c_add,          // c += i * g
  tanh_state,     // s = tanh(c)
  h_out,          // h = o * s
  dh_total,       // s0 = dy + dh_next
  dc_total,       // s1 = dc_next + s0 * o * (1 - s2^2), s2 = tanh(c) (from tanh_state)
  d_i,            // dg_i = s1 * g * i * (1 - i)
  d_f,            // dg_f = s1 * c_prev * f * (1 - f)
  d_g,            // dg_g = s1 * i * (1 - g^2)
  d_o,            // dg_o = s0 * s2 * o * (1 - o)
  dc_prev_op,     // dc_prev = s1 * f
};

struct UnfusedPtrs {
  void* gates;
  const void* c_prev;
  void* c;
  void* h;
  const void* dy;
  const void* dh_next;
  const void* dc_next;
  void* dgates;
  void* dc_prev;
  void* s0;
  void* s1;
  void* s2;
};

template <typename T>
__global__ void unfused_kernel(Op op, int blk, UnfusedPtrs p, std::int64_t B, std::int64_t H) {
  T* gates = static_cast<T*>(p.gates);
  const T* cprev = static_cast<const T*>(p.c_prev);
  T* c = static_cast<T*>(p.c);
  T* s0 = static_cast<T*>(p.s0);
  T* s1 = static_cast<T*>(p.s1);
  T* s2 = static_cast<T*>(p.s2);
  T* dg = static_cast<T*>(p.dgates);
  ANVIL_GRID_LOOP(e, B * H) {
    const std::int64_t b = e / H, j = e - b * H;
    T* g = gates + b * 4 * H;
    const T cp = cprev != nullptr ? cprev[e] : T(0);
    switch (op) {
      case Op::sigmoid_block:
        g[blk * H + j] = d_sigmoid(g[blk * H + j]);
        break;
      case Op::tanh_block:
        g[blk * H + j] = d_tanh(g[blk * H + j]);
        break;
      case Op::c_forget:
        c[e] = g[H + j] * cp;
        break;
      case Op::c_add:
        c[e] = c[e] + g[j] * g[2 * H + j];
        break;
      case Op::tanh_state:
        s2[e] = d_tanh(static_cast<const T*>(p.c)[e]);
        break;
      case Op::h_out:
        static_cast<T*>(p.h)[e] = g[3 * H + j] * s2[e];
        break;
      case Op::dh_total: {
        const T* dhn = static_cast<const T*>(p.dh_next);
        s0[e] = static_cast<const T*>(p.dy)[e] + (dhn != nullptr ? dhn[e] : T(0));
        break;
      }
      case Op::dc_total: {
        const T* dcn = static_cast<const T*>(p.dc_next);
        s1[e] = (dcn != nullptr ? dcn[e] : T(0)) + s0[e] * g[3 * H + j] * (T(1) - s2[e] * s2[e]);
        break;
      }
      case Op::d_i:
        dg[b * 4 * H + j] = s1[e] * g[2 * H + j] * g[j] * (T(1) - g[j]);
        break;
      case Op::d_f:
        dg[b * 4 * H + H + j] = s1[e] * cp * g[H + j] * (T(1) - g[H + j]);
        break;
      case Op::d_g:
        dg[b * 4 * H + 2 * H + j] = s1[e] * g[j] * (T(1) - g[2 * H + j] * g[2 * H + j]);
        break;
      case Op::d_o:
        dg[b * 4 * H + 3 * H + j] = s0[e] * s2[e] * g[3 * H + j] * (T(1) - g[3 * H + j]);
        break;
      case Op::dc_prev_op:
        static_cast<T*>(p.dc_prev)[e] = s1[e] * g[H + j];
        break;
    }
  }
}

template <typename T>
void launch_unfused(cudaStream_t stream, Op op, int blk, const UnfusedPtrs& p, std::int64_t B,
                    std::int64_t H) {
  unfused_kernel<T><<<blocks_for_n(B * H), kLstmThreads, 0, stream>>>(op, blk, p, B, H);
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

// Column sums: one thread per column, rows in order, double accumulator.
template <typename T>
__global__ void column_sums_kernel(const T* m, T* out, std::int64_t rows, std::int64_t cols) {
  ANVIL_GRID_LOOP(j, cols) {
    double acc = 0.0;
    for (std::int64_t r = 0; r < rows; ++r) acc += static_cast<double>(m[r * cols + j]);
    out[j] = static_cast<T>(acc);
  }
}

template <typename Fn>
void with_dtype(DType dtype, const char* where, Fn&& fn) {
  ANVIL_CHECK(dtype == DType::f32 || dtype == DType::f64, where, "needs f32 or f64, got ",
              dtype_name(dtype));
  if (dtype == DType::f64)
    fn(double{});
  else
    fn(float{});
}

}  // namespace

void lstm_bias_rows(cudaStream_t stream, DType dtype, void* g, const void* b_ih, const void* b_hh,
                    std::int64_t rows, std::int64_t h4) {
  if (rows * h4 == 0) return;
  with_dtype(dtype, "lstm_bias_rows", [&](auto zero) {
    using T = decltype(zero);
    bias_rows_kernel<T><<<blocks_for_n(rows * h4), kLstmThreads, 0, stream>>>(
        static_cast<T*>(g), static_cast<const T*>(b_ih), static_cast<const T*>(b_hh), rows, h4);
    ANVIL_CUDA_CHECK(cudaGetLastError());
  });
}

void lstm_cell_forward(cudaStream_t stream, DType dtype, bool fused, void* gates,
                       const void* c_prev, void* c, void* h, void* scratch, std::int64_t B,
                       std::int64_t H) {
  if (B * H == 0) return;
  with_dtype(dtype, "lstm_cell_forward", [&](auto zero) {
    using T = decltype(zero);
    if (fused) {
      cell_forward_fused<T><<<blocks_for_n(B * H), kLstmThreads, 0, stream>>>(
          static_cast<T*>(gates), static_cast<const T*>(c_prev), static_cast<T*>(c),
          static_cast<T*>(h), B, H);
      ANVIL_CUDA_CHECK(cudaGetLastError());
      return;
    }
    ANVIL_CHECK(scratch != nullptr, "lstm_cell_forward", "the unfused cell needs scratch");
    UnfusedPtrs p{gates,   c_prev,  c,       h,       nullptr, nullptr,
                  nullptr, nullptr, nullptr, nullptr, nullptr, scratch};
    launch_unfused<T>(stream, Op::sigmoid_block, 0, p, B, H);  // i
    launch_unfused<T>(stream, Op::sigmoid_block, 1, p, B, H);  // f
    launch_unfused<T>(stream, Op::tanh_block, 2, p, B, H);     // g
    launch_unfused<T>(stream, Op::sigmoid_block, 3, p, B, H);  // o
    launch_unfused<T>(stream, Op::c_forget, 0, p, B, H);
    launch_unfused<T>(stream, Op::c_add, 0, p, B, H);
    launch_unfused<T>(stream, Op::tanh_state, 0, p, B, H);
    launch_unfused<T>(stream, Op::h_out, 0, p, B, H);
  });
}

void lstm_cell_backward(cudaStream_t stream, DType dtype, bool fused, const void* gates,
                        const void* c_prev, const void* c, const void* dy_t, const void* dh_next,
                        const void* dc_next, void* dgates, void* dc_prev, void* scratch,
                        std::int64_t B, std::int64_t H) {
  if (B * H == 0) return;
  with_dtype(dtype, "lstm_cell_backward", [&](auto zero) {
    using T = decltype(zero);
    if (fused) {
      cell_backward_fused<T><<<blocks_for_n(B * H), kLstmThreads, 0, stream>>>(
          static_cast<const T*>(gates), static_cast<const T*>(c_prev), static_cast<const T*>(c),
          static_cast<const T*>(dy_t), static_cast<const T*>(dh_next),
          static_cast<const T*>(dc_next), static_cast<T*>(dgates), static_cast<T*>(dc_prev), B, H);
      ANVIL_CUDA_CHECK(cudaGetLastError());
      return;
    }
    ANVIL_CHECK(scratch != nullptr, "lstm_cell_backward", "the unfused cell needs scratch");
    T* s = static_cast<T*>(scratch);
    UnfusedPtrs p{const_cast<void*>(gates),
                  c_prev,
                  const_cast<void*>(c),
                  nullptr,
                  dy_t,
                  dh_next,
                  dc_next,
                  dgates,
                  dc_prev,
                  s,
                  s + B * H,
                  s + 2 * B * H};
    launch_unfused<T>(stream, Op::tanh_state, 0, p, B, H);  // s2 = tanh(c)
    launch_unfused<T>(stream, Op::dh_total, 0, p, B, H);    // s0
    launch_unfused<T>(stream, Op::dc_total, 0, p, B, H);    // s1 (reads dc_next)
    launch_unfused<T>(stream, Op::d_i, 0, p, B, H);
    launch_unfused<T>(stream, Op::d_f, 0, p, B, H);
    launch_unfused<T>(stream, Op::d_g, 0, p, B, H);
    launch_unfused<T>(stream, Op::d_o, 0, p, B, H);
    launch_unfused<T>(stream, Op::dc_prev_op, 0, p, B, H);  // after dc_total: may overwrite dc_next
  });
}

void lstm_column_sums(cudaStream_t stream, DType dtype, const void* m, void* out, std::int64_t rows,
                      std::int64_t cols) {
  if (cols == 0) return;
  with_dtype(dtype, "lstm_column_sums", [&](auto zero) {
    using T = decltype(zero);
    column_sums_kernel<T><<<blocks_for_n(cols), kLstmThreads, 0, stream>>>(
        static_cast<const T*>(m), static_cast<T*>(out), rows, cols);
    ANVIL_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace anvil::cuda
