// SPDX-License-Identifier: Apache-2.0
// Batch-norm `cpu.omp`: training/inference forward and backward, f32 and f64, OpenMP-parallel.
// Layout: dense NCHW; per-channel vectors [C] (engine/dispatch/batch_norm_problem.h).
//
// Note [Batch-norm passes over memory]
// Statistics are per channel, but a channel's N planes are far apart in NCHW, so the reductions
// run per (n, c) plane (parallel over the N*C planes, vectorised inner sums) into per-plane
// partial sums that a short serial loop combines per channel in double. The training forward
// reads x twice (one statistics pass, one normalising pass) by taking sum(x - K) and
// sum((x - K)^2) in one sweep with a per-channel shift K = x[0, c, 0, 0] (the shifted
// single-pass variance loses no precision when K is near the mean, as a sample of the channel
// is); the backward reads x and dy twice (sums, then dx = a*dy + b*x + c per channel).
// Sums accumulate in T over blocks of kBlock elements (in vector lanes), then in double.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/dispatch/floating_variant.h"
#include "engine/dispatch/batch_norm_problem.h"
#include "kernels/cpu/omp/omp_kernels.h"

namespace anvil::kernels {
namespace {

constexpr std::int64_t kParallelGrain = 16384;
// Plane sums run in T over blocks of kBlock elements (vector lanes), blocks add up in double.
constexpr std::int64_t kBlock = 512;

template <typename T>
void run(const BatchNormArgs& a) {
  const BatchNormProblem& p = a.problem;
  const std::int64_t C = p.c, hw = p.h * p.w, planes = p.n * p.c;
  const double m = static_cast<double>(p.per_channel());
  const bool parallel = p.numel() >= kParallelGrain;
  const T* x = static_cast<const T*>(a.x);
  const T* weight = static_cast<const T*>(a.weight);
  const T* bias = static_cast<const T*>(a.bias);
  T* mean = static_cast<T*>(a.mean);
  T* var = static_cast<T*>(a.var);
  std::vector<double> s1(static_cast<std::size_t>(planes)), s2(static_cast<std::size_t>(planes));
  std::vector<double> invstd(static_cast<std::size_t>(C));

  if (p.pass == BatchNormPass::forward_training) {
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t pl = 0; pl < planes; ++pl) {
      const T* xp = x + pl * hw;
      const T k = x[(pl % C) * hw];  // the shift K of this channel (its first element)
      double d1 = 0, d2 = 0;
      for (std::int64_t i0 = 0; i0 < hw; i0 += kBlock) {
        const std::int64_t i1 = std::min(hw, i0 + kBlock);
        T a1 = 0, a2 = 0;
#pragma omp simd reduction(+ : a1, a2)
        for (std::int64_t i = i0; i < i1; ++i) {
          const T d = xp[i] - k;
          a1 += d;
          a2 += d * d;
        }
        d1 += a1;
        d2 += a2;
      }
      s1[pl] = d1;
      s2[pl] = d2;
    }
    for (std::int64_t c = 0; c < C; ++c) {
      double t1 = 0, t2 = 0;
      for (std::int64_t n = 0; n < p.n; ++n) {
        t1 += s1[n * C + c];
        t2 += s2[n * C + c];
      }
      const double shifted_mean = t1 / m;
      mean[c] = static_cast<T>(x[c * hw] + shifted_mean);
      var[c] = static_cast<T>(std::max(0.0, t2 / m - shifted_mean * shifted_mean));
    }
  }
  for (std::int64_t c = 0; c < C; ++c)
    invstd[c] = 1.0 / std::sqrt(static_cast<double>(var[c]) + p.eps);

  if (p.pass != BatchNormPass::backward) {  // y = x * scale + shift
    T* y = static_cast<T*>(a.y);
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t pl = 0; pl < planes; ++pl) {
      const std::int64_t c = pl % C;
      const T scale = static_cast<T>(weight[c] * invstd[c]);
      const T shift = static_cast<T>(bias[c] - mean[c] * weight[c] * invstd[c]);
      const T* xp = x + pl * hw;
      T* yp = y + pl * hw;
#pragma omp simd
      for (std::int64_t i = 0; i < hw; ++i) yp[i] = xp[i] * scale + shift;
    }
    return;
  }

  // Backward: per plane sum(dy) and sum(dy * (x - mean)), then per channel coefficients.
  const T* dy = static_cast<const T*>(a.dy);
  T* dx = static_cast<T*>(a.dx);
  T* dweight = static_cast<T*>(a.dweight);
  T* dbias = static_cast<T*>(a.dbias);
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t pl = 0; pl < planes; ++pl) {
    const T mu = mean[pl % C];
    const T* xp = x + pl * hw;
    const T* gp = dy + pl * hw;
    double d1 = 0, d2 = 0;
    for (std::int64_t i0 = 0; i0 < hw; i0 += kBlock) {
      const std::int64_t i1 = std::min(hw, i0 + kBlock);
      T a1 = 0, a2 = 0;
#pragma omp simd reduction(+ : a1, a2)
      for (std::int64_t i = i0; i < i1; ++i) {
        a1 += gp[i];
        a2 += gp[i] * (xp[i] - mu);
      }
      d1 += a1;
      d2 += a2;
    }
    s1[pl] = d1;
    s2[pl] = d2;
  }
  // dx = ka*dy + kb*x + kc per channel.
  std::vector<T> ka(static_cast<std::size_t>(C)), kb(ka.size()), kc(ka.size());
  for (std::int64_t c = 0; c < C; ++c) {
    double sdy = 0, sdyxm = 0;
    for (std::int64_t n = 0; n < p.n; ++n) {
      sdy += s1[n * C + c];
      sdyxm += s2[n * C + c];
    }
    const double is = invstd[c], wc = weight[c];
    dbias[c] = static_cast<T>(sdy);
    dweight[c] = static_cast<T>(sdyxm * is);
    ka[c] = static_cast<T>(wc * is);
    if (p.batch_stats) {
      // dx = w*is*(dy - sdy/m - (x-mu)*is^2*sdyxm/m)
      const double b = -wc * is * is * is * sdyxm / m;
      kb[c] = static_cast<T>(b);
      kc[c] = static_cast<T>(-wc * is * sdy / m - b * static_cast<double>(mean[c]));
    } else {
      kb[c] = kc[c] = T(0);
    }
  }
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t pl = 0; pl < planes; ++pl) {
    const std::int64_t c = pl % C;
    const T A = ka[c], B = kb[c], K = kc[c];
    const T* xp = x + pl * hw;
    const T* gp = dy + pl * hw;
    T* dp = dx + pl * hw;
#pragma omp simd
    for (std::int64_t i = 0; i < hw; ++i) dp[i] = A * gp[i] + B * xp[i] + K;
  }
}

}  // namespace

void register_batch_norm_omp() {
  batch_norm2d_table().add(floating_variant("cpu.omp", run<float>, run<double>,
                                            "OpenMP over N*C planes, one-pass shifted statistics "
                                            "(Note [Batch-norm passes over memory])"));
}

}  // namespace anvil::kernels
