// SPDX-License-Identifier: Apache-2.0
// The `ref` variants of the optimizer tables: serial loops over each tensor of the list, in the
// parameter's type, written for clarity; the CPU and CUDA variants are tested against them.
// Layout: every buffer dense, OptimTensor::numel elements (engine/dispatch/optimizer_problem.h).
#include <cmath>

#include "engine/dispatch/floating_variant.h"
#include "engine/dispatch/optimizer_problem.h"
#include "kernels/cpu/optimizer_register.h"

namespace anvil::kernels {
namespace {

template <typename T>
void sgd_ref(const OptimizerArgs& a) {
  const SgdHyper& h = a.sgd;
  for (std::int64_t k = 0; k < a.problem.tensors; ++k) {
    const OptimTensor& t = a.tensors[k];
    T* p = static_cast<T*>(t.param);
    const T* g = static_cast<const T*>(t.grad);
    T* buf = static_cast<T*>(t.state1);
    for (std::int64_t i = 0; i < t.numel; ++i) {
      const T d = g[i] + static_cast<T>(h.weight_decay) * p[i];
      T step = d;
      if (h.momentum != 0.0) {
        const T b =
            t.first ? d
                    : static_cast<T>(h.momentum) * buf[i] + static_cast<T>(1.0 - h.dampening) * d;
        buf[i] = b;
        step = h.nesterov ? d + static_cast<T>(h.momentum) * b : b;
      }
      p[i] -= static_cast<T>(h.lr) * step;
    }
  }
}

template <typename T>
void adam_ref(const OptimizerArgs& a) {
  const AdamHyper& h = a.adam;
  const T b1 = static_cast<T>(h.beta1), b2 = static_cast<T>(h.beta2);
  const T c_b1 = static_cast<T>(1.0 - h.beta1), c_b2 = static_cast<T>(1.0 - h.beta2);
  const T step = static_cast<T>(h.lr / h.c1), inv_sqrt_c2 = static_cast<T>(1.0 / std::sqrt(h.c2));
  // Adam: L2 decay in the gradient. AdamW (decoupled_decay): p *= 1 - lr * wd, then the update.
  const bool decoupled = a.problem.decoupled_decay;
  const T wd = static_cast<T>(decoupled ? 0.0 : h.weight_decay);
  const T keep = static_cast<T>(1.0 - h.lr * h.weight_decay);
  for (std::int64_t k = 0; k < a.problem.tensors; ++k) {
    const OptimTensor& t = a.tensors[k];
    T* p = static_cast<T*>(t.param);
    const T* g = static_cast<const T*>(t.grad);
    T* m = static_cast<T*>(t.state1);
    T* v = static_cast<T*>(t.state2);
    for (std::int64_t i = 0; i < t.numel; ++i) {
      if (decoupled) p[i] *= keep;
      const T d = g[i] + wd * p[i];
      m[i] = b1 * m[i] + c_b1 * d;
      v[i] = b2 * v[i] + c_b2 * d * d;
      p[i] -= step * m[i] / (std::sqrt(v[i]) * inv_sqrt_c2 + static_cast<T>(h.eps));
    }
  }
}

template <typename T>
void grad_norm_ref(const OptimizerArgs& a) {
  double s = 0.0;
  for (std::int64_t k = 0; k < a.problem.tensors; ++k) {
    const T* g = static_cast<const T*>(a.tensors[k].grad);
    for (std::int64_t i = 0; i < a.tensors[k].numel; ++i)
      s += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  }
  *a.result = s;
}

template <typename T>
void grad_scale_ref(const OptimizerArgs& a) {
  const T s = static_cast<T>(a.scale);
  bool bad = false;
  for (std::int64_t k = 0; k < a.problem.tensors; ++k) {
    T* g = static_cast<T*>(a.tensors[k].grad);
    for (std::int64_t i = 0; i < a.tensors[k].numel; ++i) {
      g[i] = g[i] * s;
      bad = bad || !std::isfinite(g[i]);
    }
  }
  if (bad && a.found_inf != nullptr) *static_cast<float*>(a.found_inf) = 1.0f;  // unscale_grads_
}

}  // namespace

void register_optimizer_ref() {
  sgd_update_table().add(
      floating_variant("ref", sgd_ref<float>, sgd_ref<double>, "serial loop per tensor"));
  adam_update_table().add(
      floating_variant("ref", adam_ref<float>, adam_ref<double>, "serial loop per tensor"));
  grad_norm_table().add(floating_variant("ref", grad_norm_ref<float>, grad_norm_ref<double>,
                                         "serial double accumulation"));
  grad_scale_table().add(floating_variant("ref", grad_scale_ref<float>, grad_scale_ref<double>,
                                          "serial loop per tensor"));
}

}  // namespace anvil::kernels
