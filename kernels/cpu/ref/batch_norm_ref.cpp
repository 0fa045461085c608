// SPDX-License-Identifier: Apache-2.0
// Batch-norm `ref`: per-channel statistics, normalisation and its gradient, written as the
// formulas read, accumulating in double, serial; f32 and f64.
// Layout: dense NCHW; per-channel vectors [C] (engine/dispatch/batch_norm_problem.h).
//   training forward: mean = sum x / M, var = sum (x - mean)^2 / M (M = N*H*W, two passes);
//   backward (batch stats): xhat = (x - mean) * invstd,
//     dbias = sum dy, dweight = sum dy * xhat,
//     dx = weight * invstd * (dy - dbias / M - xhat * dweight / M);
//   backward (running stats, eval): dx = dy * weight * invstd.
#include <cmath>

#include "engine/dispatch/floating_variant.h"
#include "engine/dispatch/batch_norm_problem.h"
#include "kernels/cpu/ref/ref_kernels.h"

namespace anvil::kernels {
namespace {

template <typename T>
void run(const BatchNormArgs& a) {
  const BatchNormProblem& p = a.problem;
  const std::int64_t hw = p.h * p.w;
  const double m = static_cast<double>(p.per_channel());
  const T* x = static_cast<const T*>(a.x);
  const T* weight = static_cast<const T*>(a.weight);
  const T* bias = static_cast<const T*>(a.bias);
  T* mean = static_cast<T*>(a.mean);
  T* var = static_cast<T*>(a.var);
  // x[n, c, :, :] as a flat plane
  auto plane = [&](auto* base, std::int64_t n, std::int64_t c) {
    return base + (n * p.c + c) * hw;
  };
  for (std::int64_t c = 0; c < p.c; ++c) {
    if (p.pass == BatchNormPass::forward_training) {
      double s = 0.0;
      for (std::int64_t n = 0; n < p.n; ++n)
        for (std::int64_t i = 0; i < hw; ++i) s += plane(x, n, c)[i];
      const double mu = s / m;
      double s2 = 0.0;
      for (std::int64_t n = 0; n < p.n; ++n)
        for (std::int64_t i = 0; i < hw; ++i) {
          const double d = plane(x, n, c)[i] - mu;
          s2 += d * d;
        }
      mean[c] = static_cast<T>(mu);
      var[c] = static_cast<T>(s2 / m);
    }
    const double mu = mean[c];
    const double invstd = 1.0 / std::sqrt(static_cast<double>(var[c]) + p.eps);
    const double wc = weight[c];
    if (p.pass != BatchNormPass::backward) {
      const double bc = bias[c];
      T* y = static_cast<T*>(a.y);
      for (std::int64_t n = 0; n < p.n; ++n)
        for (std::int64_t i = 0; i < hw; ++i)
          plane(y, n, c)[i] = static_cast<T>((plane(x, n, c)[i] - mu) * invstd * wc + bc);
      continue;
    }
    const T* dy = static_cast<const T*>(a.dy);
    T* dx = static_cast<T*>(a.dx);
    double sdy = 0.0, sdyx = 0.0;
    for (std::int64_t n = 0; n < p.n; ++n)
      for (std::int64_t i = 0; i < hw; ++i) {
        sdy += plane(dy, n, c)[i];
        sdyx += plane(dy, n, c)[i] * (plane(x, n, c)[i] - mu) * invstd;
      }
    static_cast<T*>(a.dbias)[c] = static_cast<T>(sdy);
    static_cast<T*>(a.dweight)[c] = static_cast<T>(sdyx);
    for (std::int64_t n = 0; n < p.n; ++n)
      for (std::int64_t i = 0; i < hw; ++i) {
        const double g = plane(dy, n, c)[i];
        const double xhat = (plane(x, n, c)[i] - mu) * invstd;
        const double d =
            p.batch_stats ? wc * invstd * (g - sdy / m - xhat * sdyx / m) : wc * invstd * g;
        plane(dx, n, c)[i] = static_cast<T>(d);
      }
  }
}

}  // namespace

void register_batch_norm_ref() {
  batch_norm2d_table().add(floating_variant("ref", run<float>, run<double>,
                                            "per-channel loops in double (reference), f32/f64"));
}

}  // namespace anvil::kernels
