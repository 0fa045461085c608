// SPDX-License-Identifier: Apache-2.0
// Softmax-family `ref`: serial, three plain passes per row in double (max, sum of exp, write),
// for softmax / log-softmax, their backward and the fused cross-entropy
// (engine/dispatch/softmax_problem.h); f32/f64 values, i32/i64 class ids.
#include <cmath>
#include <cstdint>
#include <limits>

#include "engine/core/error.h"
#include "engine/dispatch/softmax_problem.h"
#include "kernels/cpu/ref/ref_kernels.h"

namespace anvil::kernels {
namespace {

// log(sum_c exp(x[c])) with the conventions of the other variants: +inf anywhere gives +inf;
// otherwise a NaN gives NaN and an all -inf row gives -inf.
template <typename T>
double row_lse(const T* x, std::int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t c = 0; c < n; ++c)
    if (static_cast<double>(x[c]) > m) m = x[c];
  if (std::isinf(m) && m > 0) return m;
  const double shift = std::isinf(m) ? 0.0 : m;  // all -inf (or empty): sum exp(x) is 0 or NaN
  double s = 0.0;
  for (std::int64_t c = 0; c < n; ++c) s += std::exp(static_cast<double>(x[c]) - shift);
  return shift + std::log(s);
}

template <typename T, typename I>
void run_ref(const SoftmaxArgs& a) {
  const auto& p = a.problem;
  const std::int64_t rows = p.rows, cols = p.cols;
  const T* x = static_cast<const T*>(a.x);
  T* out = static_cast<T*>(a.out);
  const I* target = static_cast<const I*>(a.target);
  if (p.op == SoftmaxOp::cross_entropy_forward || p.op == SoftmaxOp::cross_entropy_forward_grad)
    for (std::int64_t r = 0; r < rows; ++r)
      ANVIL_CHECK(target[r] >= 0 && target[r] < cols, "cross_entropy", "target ", +target[r],
                  " at row ", r, " is out of range for ", cols, " classes");
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    switch (p.op) {
      case SoftmaxOp::softmax:
      case SoftmaxOp::log_softmax: {
        const double lse = row_lse(xr, cols);
        for (std::int64_t c = 0; c < cols; ++c) {
          const double z = static_cast<double>(xr[c]) - lse;
          out[r * cols + c] = static_cast<T>(p.op == SoftmaxOp::log_softmax ? z : std::exp(z));
        }
        break;
      }
      case SoftmaxOp::softmax_backward:
      case SoftmaxOp::log_softmax_backward: {
        const T* g = static_cast<const T*>(a.dy) + r * cols;
        const bool log = p.op == SoftmaxOp::log_softmax_backward;
        double dot = 0.0;
        for (std::int64_t c = 0; c < cols; ++c)
          dot += static_cast<double>(g[c]) * (log ? 1.0 : static_cast<double>(xr[c]));
        for (std::int64_t c = 0; c < cols; ++c) {
          const double y = xr[c], dy = g[c];
          out[r * cols + c] = static_cast<T>(log ? dy - std::exp(y) * dot : y * (dy - dot));
        }
        break;
      }
      case SoftmaxOp::cross_entropy_forward: {
        const double lse = row_lse(xr, cols);
        static_cast<T*>(a.lse)[r] = static_cast<T>(lse);
        out[r] = static_cast<T>(lse - static_cast<double>(xr[target[r]]));
        break;
      }
      case SoftmaxOp::cross_entropy_forward_grad: {
        const double lse = row_lse(xr, cols);
        static_cast<T*>(a.lse)[r] = static_cast<T>(lse);
        out[r] = static_cast<T>(lse - static_cast<double>(xr[target[r]]));
        T* g = static_cast<T*>(a.grad) + r * cols;  // may be xr: each element read, then written
        for (std::int64_t c = 0; c < cols; ++c)
          g[c] = static_cast<T>(std::exp(static_cast<double>(xr[c]) - lse) -
                                (c == target[r] ? 1.0 : 0.0));
        break;
      }
      case SoftmaxOp::cross_entropy_backward: {
        const double lse = static_cast<const T*>(a.lse)[r];
        for (std::int64_t c = 0; c < cols; ++c)
          out[r * cols + c] = static_cast<T>(a.scale * (std::exp(static_cast<double>(xr[c]) - lse) -
                                                        (c == target[r] ? 1.0 : 0.0)));
        break;
      }
    }
  }
  if (p.op == SoftmaxOp::cross_entropy_forward_grad && a.col_sums) {
    const T* g = static_cast<const T*>(a.grad);
    for (std::int64_t c = 0; c < cols; ++c) {
      double s = 0.0;
      for (std::int64_t r = 0; r < rows; ++r) s += static_cast<double>(g[r * cols + c]);
      static_cast<T*>(a.col_sums)[c] = static_cast<T>(s);
    }
  }
}

}  // namespace

void register_softmax_ref() {
  softmax_table().add({.name = "ref",
                       .supports = softmax_basic_support,
                       .fn =
                           [](const SoftmaxArgs& a) {
                             visit_floating(a.problem.dtype, [&](auto t) {
                               visit_integer(a.problem.index_dtype,
                                             [&](auto i) { run_ref<decltype(t), decltype(i)>(a); });
                             });
                           },
                       .description = "serial three-pass rows in double (reference)"});
}

}  // namespace anvil::kernels
