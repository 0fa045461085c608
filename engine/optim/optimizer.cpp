// SGD, Adam and gradient clipping (engine/optim/optimizer.h) over the fused CPU kernels.
#include "engine/optim/optimizer.h"

#include <cmath>

#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/views.h"
#include "engine/ops/elementwise.h"
#include "kernels/cpu/omp/omp_kernels.h"

namespace anvil::optim {
namespace {

// The optimizers update dense CPU parameters in place; anything else is a clear error for now.
void check_param(const Tensor& p, const Tensor& g, const char* where) {
  ANVIL_CHECK(p.device().is_cpu(), where, "parameters on ", p.device(), " are not supported yet");
  ANVIL_CHECK(p.is_contiguous() && g.is_contiguous(), where,
              "parameter and gradient must be contiguous, got strides ", shape_str(p.strides()),
              " and ", shape_str(g.strides()));
  ANVIL_CHECK(g.sizes() == p.sizes() && g.dtype() == p.dtype(), where, "gradient ",
              shape_str(g.sizes()), " ", dtype_name(g.dtype()), " does not match parameter ",
              shape_str(p.sizes()), " ", dtype_name(p.dtype()));
}

template <typename Fn>
void with_float(DType t, const char* where, Fn&& fn) {
  ANVIL_CHECK(is_floating(t), where, "parameters must be floating point, got ", dtype_name(t));
  if (t == DType::f64) fn(double{});
  else fn(float{});
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (const auto& p : params_) check_defined(p, "Optimizer", "parameter");
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& p : params_) {
    Tensor& g = p.mutable_grad();
    if (set_to_none) g = Tensor();
    else if (g.defined()) g.zero_();
  }
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params)), opt_(options) {
  ANVIL_CHECK(opt_.lr >= 0 && opt_.momentum >= 0 && opt_.weight_decay >= 0, "SGD",
              "lr, momentum and weight_decay must be >= 0, got ", opt_.lr, ", ", opt_.momentum, ", ",
              opt_.weight_decay);
  ANVIL_CHECK(!opt_.nesterov || (opt_.momentum > 0 && opt_.dampening == 0), "SGD",
              "Nesterov needs momentum > 0 and dampening 0");
  momentum_.resize(params_.size());
}

void SGD::fold_into_backward(bool on) {
  ANVIL_CHECK(!on || (opt_.momentum == 0 && opt_.weight_decay == 0 && !opt_.nesterov),
              "SGD::fold_into_backward", "only plain SGD can be folded, got momentum=",
              opt_.momentum, " weight_decay=", opt_.weight_decay, " nesterov=", opt_.nesterov);
  folded_ = on;
  for (auto& p : params_) ensure_autograd_meta(p).folded_sgd_lr = on ? opt_.lr : 0.0;
}

void SGD::set_lr(double lr) {
  opt_.lr = lr;
  if (folded_) fold_into_backward(true);
}

void SGD::step() {
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    const Tensor& g = p.grad();
    if (!g.defined()) continue;  // parameter not reached by backward
    check_param(p, g, "SGD::step");
    const bool first = !momentum_[i].defined();
    if (opt_.momentum != 0.0 && first) momentum_[i] = Tensor::empty(p.sizes(), p.dtype());
    with_float(p.dtype(), "SGD::step", [&](auto z) {
      using T = decltype(z);
      kernels::sgd_update<T>(p.data<T>(), g.data<T>(),
                             opt_.momentum != 0.0 ? momentum_[i].data<T>() : nullptr, p.numel(),
                             opt_.lr, opt_.momentum, opt_.dampening, opt_.weight_decay,
                             opt_.nesterov, first);
    });
  }
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Optimizer(std::move(params)), opt_(options) {
  ANVIL_CHECK(opt_.lr >= 0 && opt_.eps >= 0 && opt_.beta1 >= 0 && opt_.beta1 < 1 && opt_.beta2 >= 0 &&
                  opt_.beta2 < 1,
              "Adam", "invalid options lr=", opt_.lr, " betas=(", opt_.beta1, ", ", opt_.beta2,
              ") eps=", opt_.eps);
  m_.resize(params_.size());
  v_.resize(params_.size());
}

void Adam::step() {
  NoGradGuard no_grad;
  ++t_;
  const double c1 = 1.0 - std::pow(opt_.beta1, static_cast<double>(t_));
  const double c2 = 1.0 - std::pow(opt_.beta2, static_cast<double>(t_));
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    check_param(p, g, "Adam::step");
    if (!m_[i].defined()) {
      m_[i] = Tensor::zeros(p.sizes(), p.dtype());
      v_[i] = Tensor::zeros(p.sizes(), p.dtype());
    }
    with_float(p.dtype(), "Adam::step", [&](auto z) {
      using T = decltype(z);
      kernels::adam_update<T>(p.data<T>(), g.data<T>(), m_[i].data<T>(), v_[i].data<T>(), p.numel(),
                              opt_.lr, opt_.beta1, opt_.beta2, opt_.eps, opt_.weight_decay, c1, c2);
    });
  }
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  ANVIL_CHECK(max_norm > 0, "clip_grad_norm_", "max_norm must be positive, got ", max_norm);
  NoGradGuard no_grad;
  double total = 0.0;
  for (const auto& p : params) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    const Tensor c = raw::contiguous(g);
    with_float(c.dtype(), "clip_grad_norm_", [&](auto z) {
      using T = decltype(z);
      total += kernels::sum_squares<T>(c.data<T>(), c.numel());
    });
  }
  const double norm = std::sqrt(total);
  const double scale = max_norm / (norm + 1e-6);
  if (scale < 1.0)
    for (const auto& p : params)
      if (p.grad().defined()) ops::mul_scalar_(p.grad(), scale);
  return norm;
}

}  // namespace anvil::optim
