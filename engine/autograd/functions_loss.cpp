// binary_cross_entropy_with_logits with its backward.
//
// Note [Stable BCE with logits]
// loss_i = max(x, 0) - x t + log1p(exp(-|x|)) equals -t log s(x) - (1-t) log(1-s(x)) without
// overflow for large |x|; the mean is over all elements. d/dx = (s(x) - t) / N and
// d/dt = -x / N.
#include <cmath>

#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"

namespace anvil {

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target) {
  const char* where = "binary_cross_entropy_with_logits";
  check_defined(logits, where, "logits");
  check_defined(target, where, "target");
  ANVIL_CHECK(logits.sizes() == target.sizes(), where, "logits ", shape_str(logits.sizes()),
              " and target ", shape_str(target.sizes()), " must have the same shape");
  ANVIL_CHECK(is_floating(logits.dtype()) && logits.dtype() == target.dtype(), where,
              "logits and target must share a float dtype, got ", dtype_name(logits.dtype()),
              " and ", dtype_name(target.dtype()));
  check_same_device(logits, target, where);
  ANVIL_CHECK(logits.device().type == DeviceType::cpu, where, "runs on cpu only for now");
  const Tensor x = logits.contiguous().detach(), t = target.contiguous().detach();
  const std::int64_t n = x.numel();
  double s = 0.0;
  visit_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      const T* xp = x.data<T>();
      const T* tp = t.data<T>();
      for (std::int64_t i = 0; i < n; ++i) {
        const double xi = xp[i], ti = tp[i];
        s += std::max(xi, 0.0) - xi * ti + std::log1p(std::exp(-std::abs(xi)));
      }
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
             visit_dtype(x.dtype(), [&](auto zero) {
               using T = decltype(zero);
               if constexpr (std::is_floating_point_v<T>) {
                 const T* xp = x.data<T>();
                 const T* tp = t.data<T>();
                 for (std::int64_t i = 0; i < n; ++i) {
                   const double xi = xp[i];
                   if (gx) dx.data<T>()[i] = static_cast<T>(scale * (1.0 / (1.0 + std::exp(-xi)) - tp[i]));
                   if (gt) dt.data<T>()[i] = static_cast<T>(-scale * xi);
                 }
               }
             });
             return std::vector<Tensor>{dx, dt};
           });
  }
  return loss;
}

}  // namespace anvil
