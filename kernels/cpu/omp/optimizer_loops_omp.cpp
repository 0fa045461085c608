// SPDX-License-Identifier: Apache-2.0
// Fused optimizer updates (SGD, Adam) and the squared norm used by gradient clipping:
// one parallel pass per parameter tensor, f32/f64. The loops only: optimizer_omp.cpp registers
// them as the cpu.omp variants of the optimizer tables.
#include <omp.h>

#include <cmath>

#include "kernels/cpu/omp/omp_kernels.h"

namespace anvil::kernels {

namespace {
constexpr std::int64_t kGrain = 65536;  // smaller tensors are updated by one thread
}

template <typename T>
void sgd_update(T* p, const T* g, T* buf, std::int64_t n, double lr, double momentum,
                double dampening, double weight_decay, bool nesterov, bool first) {
  const T lr_t = static_cast<T>(lr), wd = static_cast<T>(weight_decay);
  const T mom = static_cast<T>(momentum), damp = static_cast<T>(1.0 - dampening);
  if (momentum == 0.0) {
#pragma omp parallel for simd schedule(static) if (n >= kGrain)
    for (std::int64_t i = 0; i < n; ++i) p[i] -= lr_t * (g[i] + wd * p[i]);
    return;
  }
#pragma omp parallel for simd schedule(static) if (n >= kGrain)
  for (std::int64_t i = 0; i < n; ++i) {
    const T d = g[i] + wd * p[i];
    const T b = first ? d : mom * buf[i] + damp * d;
    buf[i] = b;
    p[i] -= lr_t * (nesterov ? d + mom * b : b);
  }
}

template <typename T>
void adam_update(T* p, const T* g, T* m, T* v, std::int64_t n, double lr, double beta1,
                 double beta2, double eps, double weight_decay, double c1, double c2,
                 bool decoupled_decay) {
  // 1 - beta rounded from double, as PyTorch passes it (in f32, 1 - 0.999f is 1.3e-5 off).
  const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2);
  const T c_b1 = static_cast<T>(1.0 - beta1), c_b2 = static_cast<T>(1.0 - beta2);
  const T step = static_cast<T>(lr / c1), inv_sqrt_c2 = static_cast<T>(1.0 / std::sqrt(c2));
  const T e = static_cast<T>(eps);
  // L2 (Adam) enters the gradient; decoupled decay (AdamW) scales p by `keep` (1 for Adam, so
  // p * keep - x is p - x exactly).
  const T wd = static_cast<T>(decoupled_decay ? 0.0 : weight_decay);
  const T keep = static_cast<T>(decoupled_decay ? 1.0 - lr * weight_decay : 1.0);
#pragma omp parallel for simd schedule(static) if (n >= kGrain)
  for (std::int64_t i = 0; i < n; ++i) {
    const T d = g[i] + wd * p[i];
    m[i] = b1 * m[i] + c_b1 * d;
    v[i] = b2 * v[i] + c_b2 * d * d;
    p[i] = p[i] * keep - step * m[i] / (std::sqrt(v[i]) * inv_sqrt_c2 + e);
  }
}

template <typename T>
double sum_squares(const T* x, std::int64_t n) {
  double s = 0.0;
#pragma omp parallel for simd reduction(+ : s) schedule(static) if (n >= kGrain)
  for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return s;
}

template void sgd_update<float>(float*, const float*, float*, std::int64_t, double, double, double,
                                double, bool, bool);
template void sgd_update<double>(double*, const double*, double*, std::int64_t, double, double,
                                 double, double, bool, bool);
template void adam_update<float>(float*, const float*, float*, float*, std::int64_t, double, double,
                                 double, double, double, double, double, bool);
template void adam_update<double>(double*, const double*, double*, double*, std::int64_t, double,
                                  double, double, double, double, double, double, bool);
template double sum_squares<float>(const float*, std::int64_t);
template double sum_squares<double>(const double*, std::int64_t);

}  // namespace anvil::kernels
