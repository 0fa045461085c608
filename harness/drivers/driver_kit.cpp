// SPDX-License-Identifier: Apache-2.0
// Operands, the scaled comparison and the every-pair minimum of the op drivers
// (harness/drivers/driver_kit.h).
#include "harness/drivers/driver_kit.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include "engine/core/views.h"

namespace anvil::harness {

int every_pair(const OpDriver& driver, const std::string& group, DeviceType device) {
  if (device == DeviceType::cuda) return kCudaMinimumPairs;
  int pairs = 0;
  for (const auto& np : driver.group(group))
    pairs += static_cast<int>(driver.passes(np.problem).size());
  return pairs;
}

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
  return filled_tensor(shape, std::numeric_limits<double>::quiet_NaN(), dtype, device);
}

Tensor filled_tensor(const Shape& shape, double value, DType dtype, const Device& device) {
  return placed_on(Tensor::full(shape, value, dtype), device);
}

Tensor placed_on(const Tensor& host, const Device& device) {
  return device.is_cpu() ? host : raw::to_device(host, device);
}

Tensor on_host(const Tensor& t) {
  return (t.device().is_cpu() ? t : raw::to_device(t, Device::cpu())).contiguous();
}

Tensor skewed_ids(std::int64_t n, std::int64_t classes, DType dtype, std::uint64_t seed) {
  ANVIL_CHECK(n == 0 || classes > 0, "skewed_ids", n, " ids need at least one class, got ",
              classes);
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (auto& x : v) {
    const auto a = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(classes));
    const auto b = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(classes));
    x = std::min(a, b);
  }
  const Tensor t = Tensor::from_vector(v, {n});
  return dtype == DType::i64 ? t : raw::to_dtype(t, dtype);
}

std::string compare_bits(const std::string& what, const Tensor& got, const Tensor& want) {
  const Tensor g = on_host(got), w = on_host(want);
  std::ostringstream os;
  if (g.dtype() != w.dtype() || g.sizes() != w.sizes()) {
    os << what << ": " << dtype_name(g.dtype()) << " " << shape_str(g.sizes()) << " but ref is "
       << dtype_name(w.dtype()) << " " << shape_str(w.sizes()) << "; ";
    return os.str();
  }
  const std::size_t size = dtype_size(g.dtype());
  const auto* gb = static_cast<const unsigned char*>(g.data_ptr());
  const auto* wb = static_cast<const unsigned char*>(w.data_ptr());
  for (std::int64_t i = 0; i < g.numel(); ++i) {
    const std::size_t at = static_cast<std::size_t>(i) * size;
    if (std::memcmp(gb + at, wb + at, size) == 0) continue;
    const auto gv = host_f64(raw::slice(g.reshape({g.numel()}), 0, i, i + 1, 1));
    const auto wv = host_f64(raw::slice(w.reshape({w.numel()}), 0, i, i + 1, 1));
    os << what << ": differs from ref's bits (first at flat " << i << ": got " << gv[0] << ", ref "
       << wv[0] << "); ";
    return os.str();
  }
  return {};
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
