// SPDX-License-Identifier: Apache-2.0
#pragma once
// The scalar function of every EwOp, shared by the elementwise kernels of all CPU variants
// (kernels/cpu/ref/elementwise_ref.cpp, kernels/cpu/omp/elementwise_omp.cpp).
// with_ew_functor(op, T, fn) calls fn(f) where f(a, b, s, alpha) -> T computes one element;
// the switch sits outside the loops so each loop is specialised and vectorisable.
#include <cmath>
#include <type_traits>
#include <utility>

#include "engine/core/error.h"
#include "engine/core/strided_loop.h"
#include "engine/dispatch/elementwise_problem.h"

namespace anvil::kernels {

// Note [NaN propagation]
// A NaN must stay visible, as in PyTorch, or a diverging run looks finite:
//   relu(NaN) = NaN: written `a <= 0 ? 0 : a` (the comparison is false for NaN), still one
//     compare and one select, and relu(-0) = +0 as before;
//   relu_backward(y, dy) = y <= 0 ? 0 : dy, PyTorch's threshold_backward on the output: where
//     the output is NaN, dy passes;
//   maximum(a, b) is NaN when a or b is;
//   max pooling and max reductions return NaN when their window/extent holds one (pool_ref.cpp,
//     pool_omp.cpp, reduce_*.cpp); a fused conv+relu keeps a NaN pre-activation (conv_ref.cpp,
//     conv_im2col.cpp). The CUDA kernels follow the same rules (elementwise_kernels.cu).

// The coalesced (out, a, b) layout of an elementwise call (b = out's strides for unary ops).
inline StridedLayout<3> ew_layout(const ElementwiseArgs& args) {
  const std::vector<std::int64_t> sizes(args.sizes, args.sizes + args.ndim);
  const std::vector<std::int64_t> so(args.out.strides, args.out.strides + args.ndim);
  const std::vector<std::int64_t> sa(args.a.strides, args.a.strides + args.ndim);
  const std::vector<std::int64_t> sb =
      args.b.strides ? std::vector<std::int64_t>(args.b.strides, args.b.strides + args.ndim) : so;
  return make_strided_layout<3>(sizes, {&so, &sa, &sb});
}

// Note [Elementwise in 16-bit storage]
// For bf16/f16 the kernels run with_ew_functor over T = BFloat16/Float16 through
// with_ew_storage_functor: the functor of ComputeType<T> = float, wrapped to widen each
// operand to float and round the result once to the storage type (RNE). So `a + alpha*b` in bf16
// is the f32 result rounded once, the error within half a bf16 ulp (2^-9 relative), and the
// scalars (s, alpha) stay f32. For the other dtypes the wrapper is the functor itself.
template <typename T, typename Fn>
void with_ew_functor(EwOp op, Fn&& fn);

template <typename T, typename Fn>
void with_ew_storage_functor(EwOp op, Fn&& fn) {
  using C = ComputeType<T>;
  if constexpr (std::is_same_v<C, T>) {
    with_ew_functor<T>(op, std::forward<Fn>(fn));
  } else {
    with_ew_functor<C>(op, [&fn](auto f) {
      fn([f](T a, T b, C s, C alpha) {
        return convert_element<T>(f(convert_element<C>(a), convert_element<C>(b), s, alpha));
      });
    });
  }
}

template <typename T, typename Fn>
void with_ew_functor(EwOp op, Fn&& fn) {
  using S = T;  // scalars are converted to T once per call by the caller's lambda captures
  constexpr bool kFloat = std::is_floating_point_v<T>;
  switch (op) {
    case EwOp::neg:
      return fn([](T a, T, S, S) { return static_cast<T>(-a); });
    case EwOp::abs:
      return fn([](T a, T, S, S) { return a < T(0) ? static_cast<T>(-a) : a; });
    case EwOp::sign:
      return fn([](T a, T, S, S) { return static_cast<T>((a > T(0)) - (a < T(0))); });
    case EwOp::add:
      return fn([](T a, T b, S, S alpha) { return static_cast<T>(a + alpha * b); });
    case EwOp::sub:
      return fn([](T a, T b, S, S alpha) { return static_cast<T>(a - alpha * b); });
    case EwOp::mul:
      return fn([](T a, T b, S, S) { return static_cast<T>(a * b); });
    case EwOp::maximum:  // Note [NaN propagation]: NaN on either side gives NaN
      return fn([](T a, T b, S, S) { return a > b || a != a ? a : b; });
    case EwOp::gt:
      return fn([](T a, T b, S, S) { return static_cast<T>(a > b ? 1 : 0); });
    case EwOp::add_scalar:
      return fn([](T a, T, S s, S) { return static_cast<T>(a + s); });
    case EwOp::mul_scalar:
      return fn([](T a, T, S s, S) { return static_cast<T>(a * s); });
    default:
      break;
  }
  if constexpr (kFloat) {
    switch (op) {
      case EwOp::exp:
        return fn([](T a, T, S, S) { return std::exp(a); });
      case EwOp::log:
        return fn([](T a, T, S, S) { return std::log(a); });
      case EwOp::sqrt:
        return fn([](T a, T, S, S) { return std::sqrt(a); });
      case EwOp::sigmoid:
        // 1/(1+e^-a) overflows gracefully: e^-a -> inf gives 0, e^-a -> 0 gives 1.
        return fn([](T a, T, S, S) { return T(1) / (T(1) + std::exp(-a)); });
      case EwOp::tanh:
        return fn([](T a, T, S, S) { return std::tanh(a); });
      case EwOp::relu:  // Note [NaN propagation]
        return fn([](T a, T, S, S) { return a <= T(0) ? T(0) : a; });
      case EwOp::div:
        return fn([](T a, T b, S, S) { return a / b; });
      case EwOp::pow:
        return fn([](T a, T b, S, S) { return std::pow(a, b); });
      case EwOp::pow_scalar:
        return fn([](T a, T, S s, S) { return std::pow(a, s); });
      case EwOp::rsub_scalar:
        return fn([](T a, T, S s, S) { return s - a; });
      case EwOp::rdiv_scalar:
        return fn([](T a, T, S s, S) { return s / a; });
      case EwOp::sigmoid_backward:
        return fn([](T y, T dy, S, S) { return dy * y * (T(1) - y); });
      case EwOp::tanh_backward:
        return fn([](T y, T dy, S, S) { return dy * (T(1) - y * y); });
      case EwOp::relu_backward:  // Note [NaN propagation]: a NaN output passes dy
        return fn([](T x, T dy, S, S) { return x <= T(0) ? T(0) : dy; });
      case EwOp::pow_scalar_backward:
        return fn([](T x, T dy, S s, S) { return dy * s * std::pow(x, s - T(1)); });
      default:
        break;
    }
  }
  fail("elementwise", "op ", ew_name(op), " not defined for this dtype");
}

}  // namespace anvil::kernels
