// SPDX-License-Identifier: Apache-2.0
// Operands and the scaled comparison of the op drivers (harness/drivers/driver_kit.h).
#include "harness/drivers/driver_kit.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "engine/core/views.h"

namespace anvil::harness {
namespace {
Operand placed(const Tensor& host, const Device& device) {
  return {device.is_cpu() ? host : raw::to_device(host, device), raw::to_dtype(host, DType::f64)};
}
std::vector<double> host_f64(const Tensor& t) {
  const Tensor h =
      raw::to_dtype(t.device().is_cpu() ? t : raw::to_device(t, Device::cpu()), DType::f64)
          .contiguous();
  const double* d = h.data<double>();
  return {d, d + h.numel()};
}
}  // namespace

Operand uniform_operand(const Shape& shape, double low, double high, DType dtype,
                        const Device& device, Generator& gen) {
  return placed(uniform(shape, low, high, dtype, &gen), device);
}

Operand distinct_operand(const Shape& shape, DType dtype, const Device& device,
                         std::uint64_t seed) {
  Tensor t = Tensor::empty(shape, DType::f64);
  double* d = t.data<double>();
  constexpr std::uint64_t kMask = (1u << 22) - 1;
  // An odd multiplier permutes the residues mod 2^22: consecutive indices never collide, and
  // every value is a multiple of 2^-21, exact in f32.
  for (std::int64_t i = 0; i < t.numel(); ++i)
    d[i] = static_cast<double>(((static_cast<std::uint64_t>(i) + seed) * 2654435761ull) & kMask) /
               static_cast<double>(1u << 21) -
           1.0;
  return placed(raw::to_dtype(t, dtype), device);
}

Tensor nan_tensor(const Shape& shape, DType dtype, const Device& device) {
  const Tensor t = Tensor::full(shape, std::numeric_limits<double>::quiet_NaN(), dtype);
  return device.is_cpu() ? t : raw::to_device(t, device);
}

std::string compare_scaled(const std::string& what, const Tensor& got, const Tensor& want,
                           double bound, bool nan_matches_nan) {
  const auto g = host_f64(got), w = host_f64(want);
  std::ostringstream os;
  if (g.size() != w.size()) {
    os << what << ": " << g.size() << " elements but ref has " << w.size() << "; ";
    return os.str();
  }
  double scale = 1.0, worst = 0.0;
  std::size_t at = 0;
  for (double v : w)
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (g[i] == w[i] || (nan_matches_nan && std::isnan(g[i]) && std::isnan(w[i])))
      continue;  // also equal infinities
    double e = std::fabs(g[i] - w[i]);
    if (std::isnan(e)) e = std::numeric_limits<double>::infinity();
    if (e > worst) {
      worst = e;
      at = i;
    }
  }
  if (worst / scale <= bound) return {};
  os << what << ": scaled error " << worst / scale << " > bound " << bound << " (worst at flat "
     << at << ": got " << g[at] << ", ref " << w[at] << "); ";
  return os.str();
}

}  // namespace anvil::harness
