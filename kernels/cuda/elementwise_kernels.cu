// SPDX-License-Identifier: Apache-2.0
// `cuda.custom.elementwise`: every EwOp (unary, binary, scalar and backward forms) for f32/f64
// and, where defined, i32/i64. One kernel template over the op code: a flat grid-stride loop
// when all operands are dense, else the N-d strided loop over the coalesced geometry (broadcast
// operands have stride-0 dims; Note [CUDA pointwise geometry]). Semantics follow the CPU
// functors (kernels/cpu/elementwise_functors.h): scalars and alpha are converted to T first.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "engine/core/dtype.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/pointwise_geometry.cuh"

namespace anvil::cuda {
namespace {

// The op's arity and integer support as constants a kernel may read (ew_op.h's functions are
// host functions, evaluated here at compile time).
template <EwOp Op>
inline constexpr bool kBinary = ew_arity(Op) == 2;
template <EwOp Op>
inline constexpr bool kIntegerOp = ew_allows_integers(Op);

// The libm function of the matching precision (no fast-math intrinsics: results stay within
// a few ulp of the CPU's std:: functions).
__device__ __forceinline__ float m_exp(float x) { return expf(x); }
__device__ __forceinline__ double m_exp(double x) { return exp(x); }
__device__ __forceinline__ float m_log(float x) { return logf(x); }
__device__ __forceinline__ double m_log(double x) { return log(x); }
__device__ __forceinline__ float m_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double m_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float m_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double m_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float m_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double m_pow(double x, double y) { return pow(x, y); }

// x * y rounded on its own. nvcc contracts a product and a following add/sub into one FMA by
// default (--fmad=true), which rounds once where the CPU functors (built without contraction)
// round twice: a + alpha * b and 1 - a * a would then differ from the CPU in the last bit, and
// by much more relative to the result under cancellation. __fmul_rn/__dmul_rn never fuse.
template <typename T>
__device__ __forceinline__ T mul_rn(T x, T y) {
  if constexpr (std::is_same_v<T, float>)
    return __fmul_rn(x, y);
  else if constexpr (std::is_same_v<T, double>)
    return __dmul_rn(x, y);
  else
    return static_cast<T>(x * y);
}

// One element of op: a, b as in elementwise_problem.h (b = incoming gradient in the backward
// forms), s the scalar, alpha of add/sub.
template <EwOp Op, typename T>
__device__ __forceinline__ T apply(T a, T b, T s, T alpha) {
  if constexpr (Op == EwOp::neg)
    return static_cast<T>(-a);
  else if constexpr (Op == EwOp::abs)
    return a < T(0) ? static_cast<T>(-a) : a;
  else if constexpr (Op == EwOp::sign)
    return static_cast<T>((a > T(0)) - (a < T(0)));
  else if constexpr (Op == EwOp::add)
    return static_cast<T>(a + mul_rn(alpha, b));
  else if constexpr (Op == EwOp::sub)
    return static_cast<T>(a - mul_rn(alpha, b));
  else if constexpr (Op == EwOp::mul)
    return static_cast<T>(a * b);
  else if constexpr (Op == EwOp::maximum)  // Note [NaN propagation] (elementwise_functors.h)
    return a > b || a != a ? a : b;
  else if constexpr (Op == EwOp::gt)
    return static_cast<T>(a > b ? 1 : 0);
  else if constexpr (Op == EwOp::add_scalar)
    return static_cast<T>(a + s);
  else if constexpr (Op == EwOp::mul_scalar)
    return static_cast<T>(a * s);
  else if constexpr (Op == EwOp::exp)
    return m_exp(a);
  else if constexpr (Op == EwOp::log)
    return m_log(a);
  else if constexpr (Op == EwOp::sqrt)
    return m_sqrt(a);
  else if constexpr (Op == EwOp::sigmoid)
    return T(1) / (T(1) + m_exp(-a));
  else if constexpr (Op == EwOp::tanh)
    return m_tanh(a);
  else if constexpr (Op == EwOp::relu)  // NaN stays NaN
    return a <= T(0) ? T(0) : a;
  else if constexpr (Op == EwOp::div)
    return a / b;
  else if constexpr (Op == EwOp::pow)
    return m_pow(a, b);
  else if constexpr (Op == EwOp::pow_scalar)
    return m_pow(a, s);
  else if constexpr (Op == EwOp::rsub_scalar)
    return s - a;
  else if constexpr (Op == EwOp::rdiv_scalar)
    return s / a;
  else if constexpr (Op == EwOp::sigmoid_backward)
    return b * a * (T(1) - a);
  else if constexpr (Op == EwOp::tanh_backward)
    return b * (T(1) - mul_rn(a, a));
  else if constexpr (Op == EwOp::relu_backward)  // a NaN output passes the gradient
    return a <= T(0) ? T(0) : b;
  else if constexpr (Op == EwOp::pow_scalar_backward)
    return b * s * m_pow(a, s - T(1));
  else
    return a;  // unreachable: launch() checks the code
}

// out may alias a or b element for element (in-place ops); other overlaps are undefined, as on
// the CPU. For unary ops b is never read.
template <EwOp Op, typename T>
__global__ void ew_flat(T* out, const T* a, const T* b, std::int64_t n, T s, T alpha) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    T bv = T(0);
    if constexpr (kBinary<Op>) bv = b[i];
    out[i] = apply<Op, T>(a[i], bv, s, alpha);
  }
}

// Operands: 0 = out, 1 = a, 2 = b (out's strides for unary ops; b is then not read).
template <EwOp Op, typename T, typename IndexT>
__global__ void ew_strided(T* out, const T* a, const T* b, Geometry<3> g, T s, T alpha) {
  for (std::int64_t i = global_thread(); i < g.numel; i += grid_threads()) {
    std::int64_t off[3];
    offsets_of<3, IndexT>(g, static_cast<IndexT>(i), off);
    T bv = T(0);
    if constexpr (kBinary<Op>) bv = b[off[2]];
    out[off[0]] = apply<Op, T>(a[off[1]], bv, s, alpha);
  }
}

template <EwOp Op, typename T>
void launch(cudaStream_t stream, const EwLaunch& l, const Geometry<3>& g) {
  if constexpr (!std::is_floating_point_v<T> && !kIntegerOp<Op>) {
    fail("elementwise", "op code ", static_cast<int>(Op), " is not defined for dtype ",
         dtype_name(l.dtype));
  } else {
    T* out = static_cast<T*>(l.out);
    const T* a = static_cast<const T*>(l.a);
    const T* b = l.b != nullptr ? static_cast<const T*>(l.b) : a;
    const T s = static_cast<T>(l.scalar), alpha = static_cast<T>(l.alpha);
    const unsigned blocks = blocks_for(g.numel, kThreads);
    if (g.dense())
      ew_flat<Op, T><<<blocks, kThreads, 0, stream>>>(out, a, b, g.numel, s, alpha);
    else if (g.small_index())
      ew_strided<Op, T, std::uint32_t><<<blocks, kThreads, 0, stream>>>(out, a, b, g, s, alpha);
    else
      ew_strided<Op, T, std::uint64_t><<<blocks, kThreads, 0, stream>>>(out, a, b, g, s, alpha);
    ANVIL_CUDA_CHECK(cudaGetLastError());
  }
}

// Finds the template instance of the runtime code (no macro tables: a compile-time walk).
template <typename T, int Code = 0>
void dispatch(cudaStream_t stream, const EwLaunch& l, const Geometry<3>& g) {
  if constexpr (Code < kEwOpCount) {
    if (static_cast<int>(l.op) == Code) return launch<static_cast<EwOp>(Code), T>(stream, l, g);
    return dispatch<T, Code + 1>(stream, l, g);
  } else {
    fail("elementwise", "unknown op code ", static_cast<int>(l.op));
  }
}

}  // namespace

void elementwise(cudaStream_t stream, const EwLaunch& l) {
  const bool binary = ew_arity(l.op) == 2;
  ANVIL_CHECK(l.a != nullptr && l.out != nullptr && (!binary || l.b != nullptr), "elementwise",
              "null operand for op code ", static_cast<int>(l.op));
  // Unary ops: b takes out's strides so it never blocks coalescing (and is never read).
  const std::int64_t* strides[3] = {l.out_strides, l.a_strides,
                                    binary ? l.b_strides : l.out_strides};
  const Geometry<3> g = make_geometry<3>("elementwise", l.sizes, l.ndim, strides);
  if (g.numel == 0) return;
  visit_dtype(l.dtype, [&](auto zero) { dispatch<decltype(zero)>(stream, l, g); });
}

}  // namespace anvil::cuda
