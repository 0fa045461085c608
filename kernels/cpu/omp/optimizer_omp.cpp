// SPDX-License-Identifier: Apache-2.0
// The cpu.omp variants of the optimizer tables: the fused OpenMP kernels of optimizer_loops_omp.cpp
// (sgd_update, adam_update, sum_squares), one parallel pass per tensor of the list, exactly what
// optim::SGD/Adam and clip_grad_norm_ ran before the tables existed (same order, same sums).
// grad_scale multiplies in the parameter's type as ops::mul_scalar_ did; with a found_inf flag it
// also checks every result for inf/NaN in the same pass (loss scaling).
#include <omp.h>

#include <cmath>

#include "engine/dispatch/floating_variant.h"
#include "engine/dispatch/optimizer_problem.h"
#include "kernels/cpu/omp/omp_kernels.h"
#include "kernels/cpu/optimizer_register.h"

namespace anvil::kernels {
namespace {

constexpr std::int64_t kScaleGrain = 65536;  // smaller tensors are scaled by one thread

// g *= s over m elements; returns whether a result is inf or NaN.
template <typename T>
bool scale_and_check(T* g, std::int64_t m, T s) {
  int bad = 0;
#pragma omp parallel for schedule(static) if (m >= kScaleGrain) reduction(| : bad)
  for (std::int64_t i = 0; i < m; ++i) {
    const T v = g[i] * s;
    g[i] = v;
    bad |= static_cast<int>(!std::isfinite(v));
  }
  return bad != 0;
}

template <typename T>
void run_omp(const OptimizerArgs& a) {
  const std::int64_t n = a.problem.tensors;
  switch (a.problem.op) {
    case OptimOp::sgd: {
      const SgdHyper& h = a.sgd;
      for (std::int64_t k = 0; k < n; ++k) {
        const OptimTensor& t = a.tensors[k];
        sgd_update<T>(static_cast<T*>(t.param), static_cast<const T*>(t.grad),
                      static_cast<T*>(t.state1), t.numel, h.lr, h.momentum, h.dampening,
                      h.weight_decay, h.nesterov, t.first);
      }
      return;
    }
    case OptimOp::adam: {
      const AdamHyper& h = a.adam;
      for (std::int64_t k = 0; k < n; ++k) {
        const OptimTensor& t = a.tensors[k];
        adam_update<T>(static_cast<T*>(t.param), static_cast<const T*>(t.grad),
                       static_cast<T*>(t.state1), static_cast<T*>(t.state2), t.numel, h.lr, h.beta1,
                       h.beta2, h.eps, h.weight_decay, h.c1, h.c2, a.problem.decoupled_decay);
      }
      return;
    }
    case OptimOp::grad_norm: {
      double total = 0.0;
      for (std::int64_t k = 0; k < n; ++k)
        total += sum_squares<T>(static_cast<const T*>(a.tensors[k].grad), a.tensors[k].numel);
      *a.result = total;
      return;
    }
    case OptimOp::grad_scale: {
      const T s = static_cast<T>(a.scale);
      if (a.found_inf != nullptr) {  // optim::unscale_grads_
        bool bad = false;
        for (std::int64_t k = 0; k < n; ++k)
          bad = scale_and_check(static_cast<T*>(a.tensors[k].grad), a.tensors[k].numel, s) || bad;
        if (bad) *static_cast<float*>(a.found_inf) = 1.0f;
        return;
      }
      for (std::int64_t k = 0; k < n; ++k) {
        T* g = static_cast<T*>(a.tensors[k].grad);
        const std::int64_t m = a.tensors[k].numel;
#pragma omp parallel for simd schedule(static) if (m >= kScaleGrain)
        for (std::int64_t i = 0; i < m; ++i) g[i] = g[i] * s;
      }
      return;
    }
  }
}

}  // namespace

void register_optimizer_omp() {
  for (OptimOp op : {OptimOp::sgd, OptimOp::adam, OptimOp::grad_norm, OptimOp::grad_scale})
    optimizer_table(op).add(floating_variant("cpu.omp", run_omp<float>, run_omp<double>,
                                             "fused OpenMP pass per tensor"));
}

}  // namespace anvil::kernels
