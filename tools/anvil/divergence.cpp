// SPDX-License-Identifier: Apache-2.0
// The divergence guard of `anvil train` (Note [Divergence] in tools/anvil/divergence.h).
#include "tools/anvil/divergence.h"

#include <cmath>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace anvil::tools {

void DivergenceGuard::diverged(const std::string& what) {
  if (stop_)
    fail("anvil train", "training diverged at ", what, "; stopped (--on-divergence stop)",
         checkpoint_.empty() ? "" : ", " + checkpoint_ + " keeps the last good epoch",
         "; a lower --lr or --clip may help");
  if (!first_) first_ = what;
}

void DivergenceGuard::check_step(int epoch, std::int64_t step, double loss,
                                 std::optional<double> grad_norm) {
  if (!std::isfinite(loss))
    diverged(fmt::format("epoch {}, step {}: loss {}", epoch, step, loss));
  else if (grad_norm && !std::isfinite(*grad_norm))
    diverged(fmt::format("epoch {}, step {}: gradient norm {}", epoch, step, *grad_norm));
}

void DivergenceGuard::weights_not_finite(int epoch) {
  diverged(fmt::format("the end of epoch {}: the weights are not finite", epoch));
}

namespace {
template <typename T>
bool finite_elements(const Tensor& t) {
  const T* p = t.data<T>();
  for (std::int64_t i = 0, n = t.numel(); i < n; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}
}  // namespace

bool all_finite(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    const DType d = t.dtype();
    if (d != DType::f32 && d != DType::f64) continue;
    const Tensor host = (t.device().is_cpu() ? t : t.to(Device::cpu())).contiguous();
    if (!(d == DType::f32 ? finite_elements<float>(host) : finite_elements<double>(host)))
      return false;
  }
  return true;
}

}  // namespace anvil::tools
