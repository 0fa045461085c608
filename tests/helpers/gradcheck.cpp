// SPDX-License-Identifier: Apache-2.0
// The float64 central-difference gradient check (tests/helpers/gradcheck.h,
// Note [Gradient check]).
#include "helpers/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

#include "engine/autograd/grad_mode.h"
#include "engine/core/views.h"

namespace anvil::test {
namespace {

// Restores the grad mode on scope exit (the function under test may throw).
class GradModeScope {
 public:
  explicit GradModeScope(bool on) : previous_(grad_enabled()) { set_grad_enabled(on); }
  ~GradModeScope() { set_grad_enabled(previous_); }
  GradModeScope(const GradModeScope&) = delete;
  GradModeScope& operator=(const GradModeScope&) = delete;

 private:
  bool previous_;
};

// Row-major multi-index of flat position `flat` in `shape`.
Shape unravel(std::int64_t flat, const Shape& shape) {
  Shape idx(shape.size(), 0);
  for (auto d = static_cast<std::int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

// Storage element (relative to the storage start) of multi-index idx.
std::int64_t storage_offset(const Tensor& t, const Shape& idx) {
  std::int64_t off = t.offset();
  for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides()[d];
  return off;
}

bool has_overlap(const Tensor& t) {
  for (std::int64_t d = 0; d < t.dim(); ++d)
    if (t.sizes()[d] > 1 && t.strides()[d] == 0) return true;
  return false;
}

// L(x) = sum_j y_j * r_j in double.
double weighted_sum(const Tensor& y, const std::vector<double>& r) {
  const std::vector<double> v = values_f64(y);
  double s = 0.0;
  for (std::size_t j = 0; j < v.size(); ++j) s += v[j] * r[j];
  return s;
}

}  // namespace

std::vector<double> values_f64(const Tensor& t) {
  // A device tensor is copied to the host first (its memory is not readable here).
  Tensor c = raw::to_dtype(raw::contiguous(raw::to_device(t, Device::cpu())), DType::f64);
  if (!c.is_contiguous()) c = raw::clone(c);
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

Tensor uniform_leaf(const Shape& shape, double low, double high, std::uint64_t seed,
                    bool requires_grad) {
  Generator g(seed);
  Tensor t = uniform(shape, low, high, DType::f64, &g);
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

Tensor away_from_zero_leaf(const Shape& shape, double margin, double high, std::uint64_t seed) {
  Generator g(seed);
  Tensor t = uniform(shape, margin, high, DType::f64, &g);
  double* p = t.data<double>();
  std::bernoulli_distribution coin(0.5);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    if (coin(g.engine())) p[i] = -p[i];
  t.set_requires_grad(true);
  return t;
}

Tensor distinct_leaf(const Shape& shape, double spacing, std::uint64_t seed) {
  const std::int64_t n = shape_numel(shape);
  std::vector<double> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  Generator g(seed);
  std::shuffle(v.begin(), v.end(), g.engine());
  for (auto& x : v) x = (x - 0.5 * static_cast<double>(n)) * spacing;
  Tensor t = Tensor::from_vector(v, shape);
  t.set_requires_grad(true);
  return t;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto va = values_f64(a), vb = values_f64(b);
  if (va.size() != vb.size()) return INFINITY;
  double m = 0.0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    const double d = std::fabs(va[i] - vb[i]);
    if (!(d <= m)) m = d;  // NaN wins
  }
  return m;
}

GradcheckResult gradcheck(const std::string& name, const TensorFn& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opts) {
  GradcheckResult res;
  auto failed = [&](const std::string& why) {
    res.ok = false;
    res.message = "gradcheck '" + name + "': " + why;
    return res;
  };
  std::vector<std::size_t> diff_inputs;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined() || !x.requires_grad()) continue;
    if (x.dtype() != DType::f64)
      return failed("input " + std::to_string(i) + " requires grad but is " +
                    std::string(dtype_name(x.dtype())) + "; gradcheck needs f64");
    if (!x.is_leaf()) return failed("input " + std::to_string(i) + " is not a leaf");
    if (!x.device().is_cpu())  // perturbed in place through host pointers below
      return failed(
          "input " + std::to_string(i) + " is on " + x.device().str() +
          "; gradcheck perturbs CPU leaves (move them to the device inside the function)");
    if (has_overlap(x))
      return failed("input " + std::to_string(i) + " has overlapping elements (stride 0)");
    diff_inputs.push_back(i);
  }
  if (diff_inputs.empty()) return failed("no input requires grad");

  // ---- analytic: Y.backward(R) ----
  Tensor y;
  {
    GradModeScope on(true);
    y = fn(inputs);
  }
  if (!y.defined()) return failed("the function returned an undefined tensor");
  if (y.dtype() != DType::f64)
    return failed("the output is " + std::string(dtype_name(y.dtype())) + ", not f64");
  if (!y.requires_grad()) return failed("the output does not require grad (nothing was recorded)");
  Generator gen(opts.seed);
  const Tensor r = normal(y.sizes(), 0.0, 1.0, DType::f64, &gen);
  const std::vector<double> rv = values_f64(r);
  for (std::size_t i : diff_inputs)
    Tensor(inputs[i]).mutable_grad() = Tensor();  // handles share the impl
  y.backward(r);
  const Shape y_shape = y.sizes();
  const double l0 = weighted_sum(y, rv);
  y = Tensor();  // frees the graph

  std::vector<std::vector<double>> analytic(inputs.size());
  for (std::size_t i : diff_inputs) {
    const Tensor& g = inputs[i].grad();
    if (!g.defined()) {
      analytic[i].assign(static_cast<std::size_t>(inputs[i].numel()), 0.0);  // no path: zeros
      continue;
    }
    if (g.sizes() != inputs[i].sizes())
      return failed("gradient of input " + std::to_string(i) + " has shape " +
                    shape_str(g.sizes()) + " but the input is " + shape_str(inputs[i].sizes()));
    if (g.dtype() != DType::f64)
      return failed("gradient of input " + std::to_string(i) + " is " +
                    std::string(dtype_name(g.dtype())));
    analytic[i] = values_f64(g);
  }

  // ---- numeric: central differences, no recording ----
  GradModeScope off(false);
  {
    const double again = weighted_sum(fn(inputs), rv);
    if (!(again == l0))
      return failed("the function is not deterministic (two evaluations differ: " +
                    std::to_string(l0) + " vs " + std::to_string(again) + ")");
  }
  double worst = -1.0;
  std::string worst_text;
  for (std::size_t i : diff_inputs) {
    const Tensor& x = inputs[i];
    double* base = static_cast<double*>(x.storage()->data());
    for (std::int64_t j = 0; j < x.numel(); ++j) {
      const Shape idx = unravel(j, x.sizes());
      double& slot = base[storage_offset(x, idx)];
      const double orig = slot;
      slot = orig + opts.eps;
      const double lp = weighted_sum(fn(inputs), rv);
      slot = orig - opts.eps;
      const double lm = weighted_sum(fn(inputs), rv);
      slot = orig;
      const double numeric = (lp - lm) / (2.0 * opts.eps);
      const double a = analytic[i][static_cast<std::size_t>(j)];
      const double err = std::fabs(a - numeric);
      const double tol = opts.atol + opts.rtol * std::max(std::fabs(a), std::fabs(numeric));
      double ratio = err / tol;
      if (std::isnan(ratio)) ratio = INFINITY;
      ++res.checked;
      if (ratio > worst) {
        worst = ratio;
        std::ostringstream os;
        os.precision(10);
        os << "input " << i << " " << shape_str(x.sizes()) << " at " << shape_str(idx)
           << ": analytic " << a << " vs numeric " << numeric << " (|diff| " << err << ", tol "
           << tol << ")";
        worst_text = os.str();
      }
    }
  }
  res.worst_ratio = worst;
  res.ok = worst <= 1.0;
  res.message = "gradcheck '" + name + "' (output " + shape_str(y_shape) + ", " +
                std::to_string(res.checked) +
                " elements): " + (res.ok ? "ok; worst " : "FAILED; worst ") + worst_text;
  return res;
}

}  // namespace anvil::test
