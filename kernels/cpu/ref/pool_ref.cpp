// SPDX-License-Identifier: Apache-2.0
// Pooling `ref`: max, average and adaptive-average 2-D pooling, forward and backward, written as
// the definitions read (one window at a time, serial), f32, f64, bf16 and f16. A 16-bit problem
// is read as exact floats: a maximum is copied, an average summed in double and rounded once, a
// gradient accumulated per plane in f32 and rounded once (Note [Half storage types]).
// Layout: dense NCHW (engine/dispatch/pool_problem.h). Max workspace: int32 [N,C,OH,OW] holding
// ih*W + iw of each maximum in its plane (Note [Max-pool workspace]); the first maximum in
// row-major window order wins ties; a NaN always wins, the last one in window order (as in
// PyTorch; Note [NaN propagation] in kernels/cpu/elementwise_functors.h).
#include <algorithm>
#include <limits>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/half_types.h"
#include "engine/dispatch/pool_problem.h"
#include "kernels/cpu/ref/ref_kernels.h"

namespace anvil::kernels {
namespace {

// Window rows [h0, h1) and columns [w0, w1) of output (i, j), clipped to the input, and the
// average's divisor (Note [Pool output size]).
struct Window {
  std::int64_t h0, h1, w0, w1;
  double divisor;
};

Window window_of(const PoolProblem& p, std::int64_t i, std::int64_t j) {
  Window win{};
  if (p.kind == PoolKind::adaptive_avg) {
    win.h0 = adaptive_start(i, p.h, p.oh);
    win.h1 = adaptive_end(i, p.h, p.oh);
    win.w0 = adaptive_start(j, p.w, p.ow);
    win.w1 = adaptive_end(j, p.w, p.ow);
    win.divisor = double((win.h1 - win.h0) * (win.w1 - win.w0));
    return win;
  }
  std::int64_t h0 = i * p.sh - p.ph, w0 = j * p.sw - p.pw;
  std::int64_t h1 = std::min(h0 + p.kh, p.h + p.ph), w1 = std::min(w0 + p.kw, p.w + p.pw);
  const double padded_count = double((h1 - h0) * (w1 - w0));
  h0 = std::max<std::int64_t>(h0, 0);
  w0 = std::max<std::int64_t>(w0, 0);
  h1 = std::min(h1, p.h);
  w1 = std::min(w1, p.w);
  win = {h0, h1, w0, w1, p.count_include_pad ? padded_count : double((h1 - h0) * (w1 - w0))};
  return win;
}

// T is the stored type; C = ComputeType<T> (float for bf16/f16) the one values are compared and
// gradients summed in.
template <typename T>
void forward(const PoolArgs& a) {
  using C = ComputeType<T>;
  const PoolProblem& p = a.problem;
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  std::int32_t* idx = nullptr;
  if (p.kind == PoolKind::max && p.pass == PoolPass::forward_training) {
    *a.workspace = Tensor::empty({p.n, p.c, p.oh, p.ow}, DType::i32);
    idx = a.workspace->data<std::int32_t>();
  }
  for (std::int64_t pl = 0; pl < p.planes(); ++pl) {
    const T* xp = x + pl * p.h * p.w;
    for (std::int64_t i = 0; i < p.oh; ++i)
      for (std::int64_t j = 0; j < p.ow; ++j) {
        const Window win = window_of(p, i, j);
        const std::int64_t o = (pl * p.oh + i) * p.ow + j;
        if (p.kind == PoolKind::max) {
          C best = -std::numeric_limits<C>::infinity();
          std::int64_t at = win.h0 * p.w + win.w0;
          for (std::int64_t h = win.h0; h < win.h1; ++h)
            for (std::int64_t w = win.w0; w < win.w1; ++w) {
              const C v = convert_element<C>(xp[h * p.w + w]);
              if (v > best || v != v) {
                best = v;
                at = h * p.w + w;
              }
            }
          y[o] = convert_element<T>(best);  // exact: best is one of the inputs (or -inf)
          if (idx) idx[o] = static_cast<std::int32_t>(at);
        } else {
          double s = 0.0;
          for (std::int64_t h = win.h0; h < win.h1; ++h)
            for (std::int64_t w = win.w0; w < win.w1; ++w)
              s += convert_element<double>(xp[h * p.w + w]);
          y[o] = convert_element<T>(s / win.divisor);
        }
      }
  }
}

template <typename T>
void backward(const PoolArgs& a) {
  using C = ComputeType<T>;
  const PoolProblem& p = a.problem;
  const T* dy = static_cast<const T*>(a.dy);
  T* dx = static_cast<T*>(a.dx);
  const std::int32_t* idx = p.kind == PoolKind::max ? a.workspace->data<std::int32_t>() : nullptr;
  std::vector<C> acc(static_cast<std::size_t>(p.h * p.w));  // one plane of dx, summed in C
  for (std::int64_t pl = 0; pl < p.planes(); ++pl) {
    std::fill(acc.begin(), acc.end(), C(0));
    for (std::int64_t i = 0; i < p.oh; ++i)
      for (std::int64_t j = 0; j < p.ow; ++j) {
        const std::int64_t o = (pl * p.oh + i) * p.ow + j;
        const C g_out = convert_element<C>(dy[o]);
        if (idx) {
          acc[static_cast<std::size_t>(idx[o])] += g_out;
          continue;
        }
        const Window win = window_of(p, i, j);
        const auto g = static_cast<C>(g_out / win.divisor);
        for (std::int64_t h = win.h0; h < win.h1; ++h)
          for (std::int64_t w = win.w0; w < win.w1; ++w)
            acc[static_cast<std::size_t>(h * p.w + w)] += g;
      }
    T* dxp = dx + pl * p.h * p.w;
    for (std::int64_t e = 0; e < p.h * p.w; ++e)
      dxp[e] = convert_element<T>(acc[static_cast<std::size_t>(e)]);
  }
}

template <typename T>
void run(const PoolArgs& a) {
  if (a.problem.pass == PoolPass::backward)
    backward<T>(a);
  else
    forward<T>(a);
}

}  // namespace

void register_pool_ref() {
  for (PoolKind kind : {PoolKind::max, PoolKind::avg, PoolKind::adaptive_avg})
    pool_table(kind).add({
        .name = "ref",
        .supports =
            [](const PoolProblem& p) {
              return is_any_floating(p.dtype)
                         ? Support::yes()
                         : Support::no(detail::str_cat("needs f32, f64, bf16 or f16, got ",
                                                       dtype_name(p.dtype)));
            },
        .fn =
            [](const PoolArgs& a) {
              switch (a.problem.dtype) {
                case DType::f64:
                  return run<double>(a);
                case DType::bf16:
                  return run<BFloat16>(a);
                case DType::f16:
                  return run<Float16>(a);
                default:
                  return run<float>(a);
              }
            },
        .description = "serial loops over each window (reference), f32/f64/bf16/f16",
    });
}

}  // namespace anvil::kernels
