// SPDX-License-Identifier: Apache-2.0
// Row-wise softmax / log-softmax and fused softmax cross-entropy, forward and backward,
// f32/f64, rows in parallel. Max-subtracted for stability; row sums in double (f32 rows: each
// chunk's sum in float lanes first).
//
// Note [Softmax row passes]
// f32 rows use 16-lane vectors (Note [Vector width]) and the vectorised exp of
// kernels/cpu/vec_math.h (Note [Vectorised exp], <= 1 ulp from std::exp) inside AVX-512 / AVX2 /
// baseline clones; f64 rows keep std::exp. The log-sum-exp of a row is ONE pass over memory: the
// row is walked in chunks of kChunk elements (L1-resident), each chunk's max found first, the
// running sum rescaled by exp(m_old - m_new) when the max grows, then the chunk's exp(x - m) summed
// in 16 float lanes (at most kChunk / 16 terms each) and the lanes added to the row's double sum;
// widening every vector to double instead cost as much as the exp (CE forward on [4096, 10000], 1
// thread: 31 -> 22 ms, dev VM, 2026-11-22). For the language models' [B*T, 10000] logits that is
// one read of the logits in forward (loss and lse per row) and one read plus one write in backward
// (dx = s * (softmax - onehot)), instead of libm calls per element. Rows with max +-inf give lse =
// max (as before); NaN propagates through the sum.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "engine/core/error.h"
#include "engine/dispatch/softmax_problem.h"
#include "kernels/cpu/omp/omp_kernels.h"
#include "kernels/cpu/vec_math.h"

// The vector helpers are always_inline; no vector crosses a call boundary (Note [Vectorised exp]).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace anvil::kernels {
namespace {
constexpr std::int64_t kChunk = 1024;

// ---- row bodies (inlined into the f32 clones and the f64 instantiations) ---------------------

template <typename T>
__attribute__((always_inline)) inline T chunk_max(const T* __restrict x, std::int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
  std::int64_t c = 0;
  if constexpr (std::is_same_v<T, float>) {
    vec::f32v lm = vec::splat<vec::f32v>(m);
    for (; c + vec::kLanes <= n; c += vec::kLanes) {
      const vec::f32v v = vec::load(x + c);
      lm = v > lm ? v : lm;
    }
    m = vec::max_lanes(lm, m);
  }
  for (; c < n; ++c) m = x[c] > m ? x[c] : m;
  return m;
}

template <typename T>
__attribute__((always_inline)) inline double chunk_sum_exp(const T* __restrict x, std::int64_t n,
                                                           T m) {
  double s = 0.0;
  std::int64_t c = 0;
  if constexpr (std::is_same_v<T, float>) {
    // Float lanes over one chunk (<= kChunk / kLanes terms each), then double: widening every
    // vector to double cost as much as the exp itself.
    vec::f32v lanes{};
    for (; c + vec::kLanes <= n; c += vec::kLanes) lanes += vec::exp_f32v(vec::load(x + c) - m);
    s = vec::sum_lanes(lanes);
  }
  for (; c < n; ++c) s += static_cast<double>(vec::exp<T>(x[c] - m));
  return s;
}

// log(sum_c exp(x[c])) in one pass over x (Note [Softmax row passes]).
template <typename T>
__attribute__((always_inline)) inline T row_logsumexp_body(const T* __restrict x, std::int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
  double s = 0.0;
  bool nan = false;
  for (std::int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const std::int64_t len = std::min(kChunk, n - c0);
    const T* xc = x + c0;
    const T cm = chunk_max(xc, len);
    if (cm > m) {
      if (s != 0.0) s *= std::exp(static_cast<double>(m) - static_cast<double>(cm));
      m = cm;
    }
    if (std::isinf(m)) {
      // +inf decides the row (lse = +inf). -inf: nothing finite yet, the chunk adds nothing to
      // the sum, but a NaN in it must still make the row NaN (as a plain sum would).
      if (m < 0)
        for (std::int64_t c = 0; c < len; ++c) nan = nan || std::isnan(xc[c]);
      continue;
    }
    s += chunk_sum_exp(xc, len, m);
  }
  if (std::isinf(m) && m > 0) return m;
  if (nan) return std::numeric_limits<T>::quiet_NaN();
  if (std::isinf(m)) return m;
  return static_cast<T>(static_cast<double>(m) + std::log(s));
}

// d[c] = scale * exp(x[c] - shift)
template <typename T>
__attribute__((always_inline)) inline void scaled_exp_body(const T* __restrict x, T* __restrict d,
                                                           std::int64_t n, T shift, T scale) {
  std::int64_t c = 0;
  if constexpr (std::is_same_v<T, float>)
    for (; c + vec::kLanes <= n; c += vec::kLanes)
      vec::store(d + c, scale * vec::exp_f32v(vec::load(x + c) - shift));
  for (; c < n; ++c) d[c] = scale * vec::exp<T>(x[c] - shift);
}

// One row of cross_entropy_forward_grad with ONE exp per element (Note [Softmax row passes]
// uses two: the log-sum-exp's and the write's). m = max(x) first (no exp), then e = exp(x - m)
// is stored into g while it is summed (float lanes per kChunk, added up in double), then
// g = e / sum - onehot and, with kColSums, acc[c] += g[c] (the thread's float column sums).
// Returns lse = m + log(sum). x_t is read before g (which may be x) is written. Rows whose max
// is not finite (+-inf, NaN) take the two-exp path, which keeps the special-value conventions.
template <typename T, bool kColSums>
__attribute__((always_inline)) inline T grad_row_body(const T* x, T* g, std::int64_t n,
                                                      std::int64_t t, T* loss, T* __restrict acc) {
  const T m = chunk_max(x, n);
  const T xt = x[t];
  T lse;
  if (!std::isfinite(m)) {
    lse = row_logsumexp_body<T>(x, n);
    for (std::int64_t c = 0; c < n; ++c) g[c] = vec::exp<T>(x[c] - lse);
  } else {
    double s = 0.0;
    for (std::int64_t c0 = 0; c0 < n; c0 += kChunk) {
      const std::int64_t end = std::min(n, c0 + kChunk);
      std::int64_t c = c0;
      if constexpr (std::is_same_v<T, float>) {
        vec::f32v lanes{};
        for (; c + vec::kLanes <= end; c += vec::kLanes) {
          const vec::f32v e = vec::exp_f32v(vec::load(x + c) - m);
          vec::store(g + c, e);
          lanes += e;
        }
        s += vec::sum_lanes(lanes);
      }
      for (; c < end; ++c) {
        const T e = vec::exp<T>(x[c] - m);
        g[c] = e;
        s += static_cast<double>(e);
      }
    }
    lse = static_cast<T>(static_cast<double>(m) + std::log(s));
    const T inv = static_cast<T>(1.0 / s);
    for (std::int64_t c = 0; c < n; ++c) {  // normalise (and sum the columns) in one pass
      g[c] *= inv;
      if constexpr (kColSums) acc[c] += g[c];
    }
    *loss = lse - xt;
    g[t] -= T(1);
    if constexpr (kColSums) acc[t] -= T(1);
    return lse;
  }
  *loss = lse - xt;
  g[t] -= T(1);
  if constexpr (kColSums)
    for (std::int64_t c = 0; c < n; ++c) acc[c] += g[c];
  return lse;
}

// d[c] = g[c] - exp(y[c]) * s  (log-softmax backward)
template <typename T>
__attribute__((always_inline)) inline void log_softmax_bwd_body(const T* __restrict y,
                                                                const T* __restrict g,
                                                                T* __restrict d, std::int64_t n,
                                                                T s) {
  std::int64_t c = 0;
  if constexpr (std::is_same_v<T, float>)
    for (; c + vec::kLanes <= n; c += vec::kLanes)
      vec::store(d + c, vec::load(g + c) - vec::exp_f32v(vec::load(y + c)) * s);
  for (; c < n; ++c) d[c] = g[c] - vec::exp<T>(y[c]) * s;
}

// f32 entry points, cloned (resolved once at load time; never -march=native).
ANVIL_VEC_CLONES float row_logsumexp_f32(const float* x, std::int64_t n) {
  return row_logsumexp_body<float>(x, n);
}
ANVIL_VEC_CLONES void scaled_exp_f32(const float* x, float* d, std::int64_t n, float shift,
                                     float scale) {
  scaled_exp_body<float>(x, d, n, shift, scale);
}
ANVIL_VEC_CLONES float grad_row_f32(const float* x, float* g, std::int64_t n, std::int64_t t,
                                    float* loss, float* acc) {
  return acc ? grad_row_body<float, true>(x, g, n, t, loss, acc)
             : grad_row_body<float, false>(x, g, n, t, loss, acc);
}
ANVIL_VEC_CLONES void log_softmax_bwd_f32(const float* y, const float* g, float* d, std::int64_t n,
                                          float s) {
  log_softmax_bwd_body<float>(y, g, d, n, s);
}

template <typename T>
T row_logsumexp(const T* x, std::int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    return row_logsumexp_f32(x, n);
  else
    return row_logsumexp_body<T>(x, n);
}
template <typename T>
void scaled_exp(const T* x, T* d, std::int64_t n, T shift, T scale) {
  if constexpr (std::is_same_v<T, float>)
    scaled_exp_f32(x, d, n, shift, scale);
  else
    scaled_exp_body<T>(x, d, n, shift, scale);
}
template <typename T>
T grad_row(const T* x, T* g, std::int64_t n, std::int64_t t, T* loss, T* acc) {
  if constexpr (std::is_same_v<T, float>)
    return grad_row_f32(x, g, n, t, loss, acc);
  else
    return acc ? grad_row_body<T, true>(x, g, n, t, loss, acc)
               : grad_row_body<T, false>(x, g, n, t, loss, acc);
}
template <typename T>
void log_softmax_bwd(const T* y, const T* g, T* d, std::int64_t n, T s) {
  if constexpr (std::is_same_v<T, float>)
    log_softmax_bwd_f32(y, g, d, n, s);
  else
    log_softmax_bwd_body<T>(y, g, d, n, s);
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
      scaled_exp<T>(xr, yr, cols, lse, T(1));
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
      log_softmax_bwd<T>(yr, gr, dr, cols, static_cast<T>(dot));
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
    T* dr = dx + r * cols;
    scaled_exp<T>(x + r * cols, dr, cols, lse[r], s);  // one read of x, one write of dx
    dr[target[r]] -= s;
  }
}

// Note [Linear cross-entropy] (engine/autograd/functions_linear_cross_entropy.cpp): per row the
// loss and lse as cross_entropy_forward, and g = softmax(x) - onehot(target) written while the
// row is in L1/L2, with one exp per element (grad_row_body). The optional column sums of g are
// summed per thread in float over blocks of kColBlock rows, each block's sums then added into
// the thread's double sums, and the threads' double sums added at the end (a double add per
// element cost as much as the exp; the float blocks keep the rounding of short sums).
constexpr std::int64_t kColBlock = 32;

template <typename T, typename I>
void cross_entropy_forward_grad(const T* x, const I* target, T* loss, T* lse, T* g, T* col_sums,
                                std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r)  // validate first: never read out of bounds
    ANVIL_CHECK(target[r] >= 0 && target[r] < cols, "cross_entropy", "target ", +target[r],
                " at row ", r, " is out of range for ", cols, " classes");
  const int nt = rows * cols >= 32768 ? std::max(1, omp_get_max_threads()) : 1;
  const std::size_t ucols = static_cast<std::size_t>(cols);
  // Per-thread sums, allocated here: nothing inside the region may throw.
  std::vector<double> sums(col_sums ? static_cast<std::size_t>(nt) * ucols : 0, 0.0);
  std::vector<T> blocks(col_sums ? static_cast<std::size_t>(nt) * ucols : 0, T(0));
#pragma omp parallel num_threads(nt)
  {
    const int tid = omp_get_thread_num(), n = omp_get_num_threads();
    const std::int64_t r0 = rows * tid / n, r1 = rows * (tid + 1) / n;
    T* block = col_sums ? blocks.data() + static_cast<std::size_t>(tid) * ucols : nullptr;
    double* total = col_sums ? sums.data() + static_cast<std::size_t>(tid) * ucols : nullptr;
    for (std::int64_t r = r0; r < r1; ++r) {
      lse[r] = grad_row<T>(x + r * cols, g + r * cols, cols, static_cast<std::int64_t>(target[r]),
                           loss + r, block);
      if (col_sums && ((r - r0 + 1) % kColBlock == 0 || r + 1 == r1))
        for (std::size_t c = 0; c < ucols; ++c) {
          total[c] += static_cast<double>(block[c]);
          block[c] = T(0);
        }
    }
  }
  if (col_sums)
    for (std::size_t c = 0; c < ucols; ++c) {
      double s = 0.0;
      for (int t = 0; t < nt; ++t) s += sums[static_cast<std::size_t>(t) * ucols + c];
      col_sums[c] = static_cast<T>(s);
    }
}

// NOLINTBEGIN(bugprone-macro-parentheses): the arguments are types in template argument
// lists, where parentheses are not allowed.
#define ANVIL_INSTANTIATE_SOFTMAX(T)                                                               \
  template void softmax_rows<T>(const T*, T*, std::int64_t, std::int64_t, bool);                   \
  template void softmax_backward_rows<T>(const T*, const T*, T*, std::int64_t, std::int64_t,       \
                                         bool);                                                    \
  template void cross_entropy_forward<T, std::int64_t>(const T*, const std::int64_t*, T*, T*,      \
                                                       std::int64_t, std::int64_t);                \
  template void cross_entropy_forward<T, std::int32_t>(const T*, const std::int32_t*, T*, T*,      \
                                                       std::int64_t, std::int64_t);                \
  template void cross_entropy_backward<T, std::int64_t>(const T*, const std::int64_t*, const T*,   \
                                                        T*, std::int64_t, std::int64_t, double);   \
  template void cross_entropy_backward<T, std::int32_t>(const T*, const std::int32_t*, const T*,   \
                                                        T*, std::int64_t, std::int64_t, double);   \
  template void cross_entropy_forward_grad<T, std::int64_t>(const T*, const std::int64_t*, T*, T*, \
                                                            T*, T*, std::int64_t, std::int64_t);   \
  template void cross_entropy_forward_grad<T, std::int32_t>(const T*, const std::int32_t*, T*, T*, \
                                                            T*, T*, std::int64_t, std::int64_t);
ANVIL_INSTANTIATE_SOFTMAX(float)
ANVIL_INSTANTIATE_SOFTMAX(double)
#undef ANVIL_INSTANTIATE_SOFTMAX
// NOLINTEND(bugprone-macro-parentheses)

// `cpu.omp` of the softmax table (engine/dispatch/softmax_problem.h): the kernels above.
void register_softmax_omp() {
  softmax_table().add({
      .name = "cpu.omp",
      .supports = softmax_basic_support,
      .fn =
          [](const SoftmaxArgs& a) {
            const auto& p = a.problem;
            auto run = [&](auto zero, auto izero) {
              using T = decltype(zero);
              using I = decltype(izero);
              const T* x = static_cast<const T*>(a.x);
              T* out = static_cast<T*>(a.out);
              switch (p.op) {
                case SoftmaxOp::softmax:
                case SoftmaxOp::log_softmax:
                  return softmax_rows<T>(x, out, p.rows, p.cols, p.op == SoftmaxOp::log_softmax);
                case SoftmaxOp::softmax_backward:
                case SoftmaxOp::log_softmax_backward:
                  return softmax_backward_rows<T>(x, static_cast<const T*>(a.dy), out, p.rows,
                                                  p.cols, p.op == SoftmaxOp::log_softmax_backward);
                case SoftmaxOp::cross_entropy_forward:
                  return cross_entropy_forward<T, I>(x, static_cast<const I*>(a.target), out,
                                                     static_cast<T*>(a.lse), p.rows, p.cols);
                case SoftmaxOp::cross_entropy_backward:
                  return cross_entropy_backward<T, I>(x, static_cast<const I*>(a.target),
                                                      static_cast<const T*>(a.lse), out, p.rows,
                                                      p.cols, a.scale);
                case SoftmaxOp::cross_entropy_forward_grad:
                  return cross_entropy_forward_grad<T, I>(
                      x, static_cast<const I*>(a.target), out, static_cast<T*>(a.lse),
                      static_cast<T*>(a.grad), static_cast<T*>(a.col_sums), p.rows, p.cols);
              }
            };
            visit_floating(
                p.dtype, [&](auto t) { visit_integer(p.index_dtype, [&](auto i) { run(t, i); }); });
          },
      .description = "OpenMP over rows, one-pass log-sum-exp, vectorised exp (f32)",
  });
}

}  // namespace anvil::kernels
