// Dropout: a Bernoulli keep-mask scaled by 1/(1-p), drawn from a seeded Generator; the
// backward multiplies by the same mask.
#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"
#include "engine/ops/elementwise.h"

namespace anvil {

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  check_defined(x, "dropout", "input");
  ANVIL_CHECK(p >= 0.0 && p < 1.0, "dropout", "probability must be in [0, 1), got ", p);
  if (!training || p == 0.0) return x;
  ANVIL_CHECK(is_floating(x.dtype()), "dropout", "needs a floating-point tensor, got ",
              dtype_name(x.dtype()));
  Tensor mask = Tensor::empty(x.sizes(), x.dtype());
  const double scale = 1.0 / (1.0 - p);
  std::bernoulli_distribution keep(1.0 - p);
  auto& eng = (gen ? *gen : default_generator()).engine();
  visit_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* m = mask.data<T>();
    for (std::int64_t i = 0, n = mask.numel(); i < n; ++i) m[i] = keep(eng) ? static_cast<T>(scale) : T(0);
  });
  if (!x.device().is_cpu()) mask = mask.to(x.device());
  Tensor out = ops::mul(x, mask);
  if (any_requires_grad({&x}))
    record("DropoutBackward", {x}, {out}, [mask](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{ops::mul(g[0], mask)};
    });
  return out;
}

}  // namespace anvil
