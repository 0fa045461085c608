// SPDX-License-Identifier: Apache-2.0
// binary_cross_entropy_with_logits with its backward.
//
// Note [Stable BCE with logits]
// loss_i = max(x, 0) - x t + log1p(exp(-|x|)) equals -t log s(x) - (1-t) log(1-s(x)) without
// overflow for large |x|; the mean is over all elements. d/dx = (s(x) - t) / N and
// d/dt = -x / N. CPU tensors take the fused loops below; other devices (CUDA) compose the same
// formula from elementwise ops and a mean, with log(1 + e^-|x|) in place of log1p (its
// absolute error, below one ulp of 1, is immaterial next to the max(x, 0) - x t terms).
#include <cmath>
#include <type_traits>

#include "engine/autograd/autocast.h"
#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"

namespace anvil {
namespace {
using Grads = std::vector<Tensor>;

// Note [Stable BCE with logits] from elementwise ops, for devices without the fused loop.
Tensor bce_with_logits_composed(const Tensor& logits, const Tensor& target, const Tensor& x,
                                const Tensor& t, std::int64_t n) {
  using ops::unary;
  Tensor terms = ops::sub(unary(EwOp::relu, x), ops::mul(x, t));
  Tensor soft = unary(
      EwOp::log, ops::add_scalar(unary(EwOp::exp, unary(EwOp::neg, unary(EwOp::abs, x))), 1.0));
  ops::add_(terms, soft);
  Tensor loss = n > 0 ? ops::mean(terms) : Tensor::full({}, 0.0, logits.dtype(), logits.device());
  if (any_requires_grad({&logits, &target})) {
    const bool gx = logits.requires_grad(), gt = target.requires_grad();
    record("BinaryCrossEntropyWithLogitsBackward", {logits, target}, {loss},
           [x, t, n, gx, gt](const Grads& g) {
             // The incoming gradient stays on its device: multiplied as a broadcast 0-d tensor
             // (Note [Host waits in a step]).
             const double inv_n = 1.0 / static_cast<double>(std::max<std::int64_t>(n, 1));
             const Tensor gs = ops::mul_scalar(g[0].to(x.dtype()), inv_n);
             Tensor dx, dt;
             if (gx) dx = ops::mul(ops::sub(unary(EwOp::sigmoid, x), t), gs);
             if (gt) dt = ops::mul(x, ops::mul_scalar(gs, -1.0));
             return Grads{dx, dt};
           });
  }
  return loss;
}
// fn(xp, tp): the elements of the dense host tensors x and t of one floating dtype, typed.
template <typename Fn>
void with_float_elements(const Tensor& x, const Tensor& t, Fn&& fn) {
  visit_floating(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    fn(x.data<T>(), t.data<T>());
  });
}

}  // namespace

Tensor binary_cross_entropy_with_logits(const Tensor& logits_in, const Tensor& target_in) {
  const char* where = "binary_cross_entropy_with_logits";
  // On the FP32 list (Note [Autocast policy]).
  const Tensor logits = autocast_input(where, logits_in), target = autocast_input(where, target_in);
  check_defined(logits, where, "logits");
  check_defined(target, where, "target");
  ANVIL_CHECK(logits.sizes() == target.sizes(), where, "logits ", shape_str(logits.sizes()),
              " and target ", shape_str(target.sizes()), " must have the same shape");
  ANVIL_CHECK(is_floating(logits.dtype()) && logits.dtype() == target.dtype(), where,
              "logits and target must share a float dtype, got ", dtype_name(logits.dtype()),
              " and ", dtype_name(target.dtype()));
  check_same_device(logits, target, where);
  const Tensor x = logits.contiguous().detach(), t = target.contiguous().detach();
  const std::int64_t n = x.numel();
  if (!logits.device().is_cpu()) return bce_with_logits_composed(logits, target, x, t, n);
  double s = 0.0;
  with_float_elements(x, t, [&](const auto* xp, const auto* tp) {
    for (std::int64_t i = 0; i < n; ++i) {
      const double xi = xp[i], ti = tp[i];
      s += std::max(xi, 0.0) - xi * ti + std::log1p(std::exp(-std::abs(xi)));
    }
  });
  Tensor loss = Tensor::full({}, n > 0 ? s / static_cast<double>(n) : 0.0, logits.dtype());
  if (any_requires_grad({&logits, &target})) {
    const bool gx = logits.requires_grad(), gt = target.requires_grad();
    record("BinaryCrossEntropyWithLogitsBackward", {logits, target}, {loss},
           [x, t, n, gx, gt](const std::vector<Tensor>& g) {
             const double scale = g[0].item() / static_cast<double>(std::max<std::int64_t>(n, 1));
             Tensor dx = gx ? Tensor::empty(x.sizes(), x.dtype()) : Tensor();
             Tensor dt = gt ? Tensor::empty(x.sizes(), x.dtype()) : Tensor();
             with_float_elements(x, t, [&](const auto* xp, const auto* tp) {
               using T = std::remove_cv_t<std::remove_pointer_t<decltype(xp)>>;
               for (std::int64_t i = 0; i < n; ++i) {
                 const double xi = xp[i];
                 if (gx)
                   dx.data<T>()[i] = static_cast<T>(scale * (1.0 / (1.0 + std::exp(-xi)) - tp[i]));
                 if (gt) dt.data<T>()[i] = static_cast<T>(-scale * xi);
               }
             });
             return std::vector<Tensor>{dx, dt};
           });
  }
  return loss;
}

}  // namespace anvil
