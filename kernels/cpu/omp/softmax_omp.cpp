// Row-wise softmax / log-softmax and fused softmax cross-entropy, forward and backward,
// f32/f64, rows in parallel. Max-subtracted for stability; sums in double.
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "engine/core/error.h"
#include "kernels/cpu/omp/omp_kernels.h"

namespace anvil::kernels {
namespace {
template <typename T>
T row_max(const T* x, std::int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
  for (std::int64_t c = 0; c < n; ++c) m = x[c] > m ? x[c] : m;
  return m;
}
template <typename T>
T row_logsumexp(const T* x, std::int64_t n) {
  const T m = row_max(x, n);
  if (std::isinf(m)) return m;
  double s = 0.0;
  for (std::int64_t c = 0; c < n; ++c) s += std::exp(static_cast<double>(x[c] - m));
  return static_cast<T>(m + std::log(s));
}
}  // namespace

template <typename T>
void softmax_rows(const T* x, T* y, std::int64_t rows, std::int64_t cols, bool log) {
#pragma omp parallel for schedule(static) if (rows * cols >= 32768)
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    const T lse = row_logsumexp(xr, cols);
    if (log) {
      for (std::int64_t c = 0; c < cols; ++c) yr[c] = xr[c] - lse;
    } else {
      for (std::int64_t c = 0; c < cols; ++c) yr[c] = std::exp(xr[c] - lse);
    }
  }
}

template <typename T>
void softmax_backward_rows(const T* y, const T* dy, T* dx, std::int64_t rows, std::int64_t cols,
                           bool log) {
#pragma omp parallel for schedule(static) if (rows * cols >= 32768)
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* yr = y + r * cols;
    const T* gr = dy + r * cols;
    T* dr = dx + r * cols;
    double dot = 0.0;
    if (log) {
      for (std::int64_t c = 0; c < cols; ++c) dot += static_cast<double>(gr[c]);
      const T s = static_cast<T>(dot);
      for (std::int64_t c = 0; c < cols; ++c) dr[c] = gr[c] - std::exp(yr[c]) * s;
    } else {
      for (std::int64_t c = 0; c < cols; ++c) dot += static_cast<double>(gr[c]) * yr[c];
      const T s = static_cast<T>(dot);
      for (std::int64_t c = 0; c < cols; ++c) dr[c] = yr[c] * (gr[c] - s);
    }
  }
}

template <typename T, typename I>
void cross_entropy_forward(const T* x, const I* target, T* loss, T* lse, std::int64_t rows,
                           std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r)  // validate first: never read out of bounds
    ANVIL_CHECK(target[r] >= 0 && target[r] < cols, "cross_entropy", "target ", +target[r],
                " at row ", r, " is out of range for ", cols, " classes");
#pragma omp parallel for schedule(static) if (rows * cols >= 32768)
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    lse[r] = row_logsumexp(xr, cols);
    loss[r] = lse[r] - xr[target[r]];
  }
}

template <typename T, typename I>
void cross_entropy_backward(const T* x, const I* target, const T* lse, T* dx, std::int64_t rows,
                            std::int64_t cols, double scale) {
  const T s = static_cast<T>(scale);
#pragma omp parallel for schedule(static) if (rows * cols >= 32768)
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* dr = dx + r * cols;
    const T l = lse[r];
    for (std::int64_t c = 0; c < cols; ++c) dr[c] = s * std::exp(xr[c] - l);
    dr[target[r]] -= s;
  }
}

#define ANVIL_INSTANTIATE_SOFTMAX(T)                                                              \
  template void softmax_rows<T>(const T*, T*, std::int64_t, std::int64_t, bool);                 \
  template void softmax_backward_rows<T>(const T*, const T*, T*, std::int64_t, std::int64_t, bool); \
  template void cross_entropy_forward<T, std::int64_t>(const T*, const std::int64_t*, T*, T*,     \
                                                       std::int64_t, std::int64_t);             \
  template void cross_entropy_forward<T, std::int32_t>(const T*, const std::int32_t*, T*, T*,     \
                                                       std::int64_t, std::int64_t);             \
  template void cross_entropy_backward<T, std::int64_t>(const T*, const std::int64_t*, const T*,  \
                                                        T*, std::int64_t, std::int64_t, double); \
  template void cross_entropy_backward<T, std::int32_t>(const T*, const std::int32_t*, const T*,  \
                                                        T*, std::int64_t, std::int64_t, double);
ANVIL_INSTANTIATE_SOFTMAX(float)
ANVIL_INSTANTIATE_SOFTMAX(double)
#undef ANVIL_INSTANTIATE_SOFTMAX

}  // namespace anvil::kernels
