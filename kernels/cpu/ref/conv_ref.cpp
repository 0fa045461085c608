// SPDX-License-Identifier: Apache-2.0
// conv2d `ref`: the obviously correct direct loops for all three passes, f32 and f64, every
// stride/padding/dilation/groups, bias and fused relu. Each output element is one gather-sum
// accumulated in double (no scatter, no races), so it serves as the reference for every other
// variant. bf16/f16 problems run the f64 loops on the widened inputs and round each output once
// (kernels/cpu/bf16/conv_widened.h). NCHW activations, KCRS filters
// (engine/dispatch/conv_problem.h).
#include "kernels/cpu/ref/conv_ref.h"

#include <cstdint>

#include "engine/core/half_types.h"
#include "engine/dispatch/conv_problem.h"
#include "kernels/cpu/bf16/conv_widened.h"
#include "kernels/cpu/conv_passes.h"

namespace anvil::kernels {
namespace {

using i64 = std::int64_t;

// Serial below this many multiply-adds: a parallel region costs more than the work (and much
// more when tests oversubscribe the cores).
constexpr double kParallelWork = 262144.0;

template <typename T>
void forward(const ConvArgs& a) {
  const ConvProblem& pr = a.problem;
  const i64 N = pr.n, C = pr.c, H = pr.h, W = pr.w, K = pr.k, R = pr.r, S = pr.s;
  const i64 P = pr.p(), Q = pr.q(), Cg = pr.c_per_group(), Kg = pr.k_per_group();
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  const T* b = static_cast<const T*>(a.b);
  T* y = static_cast<T*>(a.y);
  const double work = static_cast<double>(N) * K * P * Q * Cg * R * S;
#pragma omp parallel for collapse(2) schedule(static) if (work >= kParallelWork)
  for (i64 n = 0; n < N; ++n)
    for (i64 k = 0; k < K; ++k) {
      const i64 c0 = (k / Kg) * Cg;  // first input channel of k's group
      for (i64 p = 0; p < P; ++p)
        for (i64 q = 0; q < Q; ++q) {
          double acc = pr.has_bias ? static_cast<double>(b[k]) : 0.0;
          for (i64 cg = 0; cg < Cg; ++cg)
            for (i64 r = 0; r < R; ++r) {
              const i64 ih = p * pr.stride_h - pr.pad_h + r * pr.dil_h;
              if (ih < 0 || ih >= H) continue;
              for (i64 s = 0; s < S; ++s) {
                const i64 iw = q * pr.stride_w - pr.pad_w + s * pr.dil_w;
                if (iw < 0 || iw >= W) continue;
                acc += static_cast<double>(x[((n * C + c0 + cg) * H + ih) * W + iw]) *
                       static_cast<double>(w[((k * Cg + cg) * R + r) * S + s]);
              }
            }
          if (pr.fuse_relu && acc <= 0.0) acc = 0.0;  // NaN stays (Note [NaN propagation])
          y[((n * K + k) * P + p) * Q + q] = static_cast<T>(acc);
        }
    }
}

// dx[n, c, ih, iw] = sum over k in c's group, r, s with ih = p*sh - ph + r*dh (and iw likewise)
// for some output position (p, q) of dy[n, k, p, q] * w[k, c - c0, r, s].
template <typename T>
void backward_data(const ConvArgs& a) {
  const ConvProblem& pr = a.problem;
  const i64 N = pr.n, C = pr.c, H = pr.h, W = pr.w, K = pr.k, R = pr.r, S = pr.s;
  const i64 P = pr.p(), Q = pr.q(), Cg = pr.c_per_group(), Kg = pr.k_per_group();
  const T* dy = static_cast<const T*>(a.dy);
  const T* w = static_cast<const T*>(a.w);
  T* dx = static_cast<T*>(a.dx);
  const double work = static_cast<double>(N) * C * H * W * Kg * R * S;
#pragma omp parallel for collapse(2) schedule(static) if (work >= kParallelWork)
  for (i64 n = 0; n < N; ++n)
    for (i64 c = 0; c < C; ++c) {
      const i64 g = c / Cg, cg = c % Cg;
      for (i64 ih = 0; ih < H; ++ih)
        for (i64 iw = 0; iw < W; ++iw) {
          double acc = 0.0;
          for (i64 r = 0; r < R; ++r) {
            const i64 ph = ih + pr.pad_h - r * pr.dil_h;  // = p * stride_h when p exists
            if (ph < 0 || ph % pr.stride_h != 0 || ph / pr.stride_h >= P) continue;
            const i64 p = ph / pr.stride_h;
            for (i64 s = 0; s < S; ++s) {
              const i64 qw = iw + pr.pad_w - s * pr.dil_w;
              if (qw < 0 || qw % pr.stride_w != 0 || qw / pr.stride_w >= Q) continue;
              const i64 q = qw / pr.stride_w;
              for (i64 kg = 0; kg < Kg; ++kg) {
                const i64 k = g * Kg + kg;
                acc += static_cast<double>(dy[((n * K + k) * P + p) * Q + q]) *
                       static_cast<double>(w[((k * Cg + cg) * R + r) * S + s]);
              }
            }
          }
          dx[((n * C + c) * H + ih) * W + iw] = static_cast<T>(acc);
        }
    }
}

// dw[k, cg, r, s] = sum_{n, p, q} dy[n, k, p, q] * x[n, c0 + cg, ih, iw];  db[k] = sum dy[n, k].
template <typename T>
void backward_weights(const ConvArgs& a) {
  const ConvProblem& pr = a.problem;
  const i64 N = pr.n, C = pr.c, H = pr.h, W = pr.w, K = pr.k, R = pr.r, S = pr.s;
  const i64 P = pr.p(), Q = pr.q(), Cg = pr.c_per_group(), Kg = pr.k_per_group();
  const T* x = static_cast<const T*>(a.x);
  const T* dy = static_cast<const T*>(a.dy);
  T* dw = static_cast<T*>(a.dw);
  T* db = static_cast<T*>(a.db);
  const double work = static_cast<double>(N) * K * P * Q * Cg * R * S;
#pragma omp parallel for collapse(2) schedule(static) if (work >= kParallelWork)
  for (i64 k = 0; k < K; ++k)
    for (i64 cg = 0; cg < Cg; ++cg) {
      const i64 c = (k / Kg) * Cg + cg;
      for (i64 r = 0; r < R; ++r)
        for (i64 s = 0; s < S; ++s) {
          double acc = 0.0;
          for (i64 n = 0; n < N; ++n)
            for (i64 p = 0; p < P; ++p) {
              const i64 ih = p * pr.stride_h - pr.pad_h + r * pr.dil_h;
              if (ih < 0 || ih >= H) continue;
              for (i64 q = 0; q < Q; ++q) {
                const i64 iw = q * pr.stride_w - pr.pad_w + s * pr.dil_w;
                if (iw < 0 || iw >= W) continue;
                acc += static_cast<double>(dy[((n * K + k) * P + p) * Q + q]) *
                       static_cast<double>(x[((n * C + c) * H + ih) * W + iw]);
              }
            }
          dw[((k * Cg + cg) * R + r) * S + s] = static_cast<T>(acc);
        }
    }
  if (pr.has_bias)
    for (i64 k = 0; k < K; ++k) {
      double acc = 0.0;
      for (i64 n = 0; n < N; ++n)
        for (i64 i = 0; i < P * Q; ++i) acc += static_cast<double>(dy[(n * K + k) * P * Q + i]);
      db[k] = static_cast<T>(acc);
    }
}

}  // namespace

void register_conv_ref() {
  const ConvTable::Fn wide =
      conv_pass_fn("conv2d ref", {forward<float>, backward_data<float>, backward_weights<float>},
                   {forward<double>, backward_data<double>, backward_weights<double>});
  conv_table().add({
      .name = "ref",
      .supports =
          [](const ConvProblem& p) {
            if (is_any_floating(p.dtype)) return Support::yes();
            return Support::no(
                detail::str_cat("needs a floating dtype, got ", dtype_name(p.dtype)));
          },
      .fn =
          [wide](const ConvArgs& a) {
            if (a.problem.dtype == DType::bf16)
              conv_widened::run<half_detail::BFloat16Format, double>(a, DType::bf16, DType::f64,
                                                                     wide, "conv2d ref");
            else if (a.problem.dtype == DType::f16)
              conv_widened::run<half_detail::Float16Format, double>(a, DType::f16, DType::f64, wide,
                                                                    "conv2d ref");
            else
              wide(a);
          },
      .description = "direct loops, f32/f64 (bf16/f16 through f64, rounded once), double "
                     "accumulation, all passes and options",
  });
}

}  // namespace anvil::kernels
