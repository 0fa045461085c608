// SPDX-License-Identifier: Apache-2.0
// Tensor-level batch norm (engine/ops/batch_norm.h): checks, allocation, dispatch, running
// statistics.
#include "engine/ops/batch_norm.h"

#include <type_traits>

#include "engine/core/views.h"
#include "engine/dispatch/trial_timer.h"
#include "engine/ops/elementwise.h"

namespace anvil::ops {
namespace {

constexpr const char* kWhere = "batch_norm2d";

// A [C] vector of x's dtype and device, dense; `fill` substitutes an undefined one.
Tensor channel_vector(const Tensor& t, const Tensor& x, const char* name, double fill) {
  const std::int64_t c = x.sizes()[1];
  if (!t.defined()) return Tensor::full({c}, fill, x.dtype(), x.device());
  ANVIL_CHECK(t.dim() == 1 && t.sizes()[0] == c, kWhere, name, " has shape ", shape_str(t.sizes()),
              " but the input ", shape_str(x.sizes()), " has ", c, " channels (expected [", c,
              "])");
  ANVIL_CHECK(t.dtype() == x.dtype(), kWhere, "dtype mismatch: input is ", dtype_name(x.dtype()),
              " but ", name, " is ", dtype_name(t.dtype()));
  check_same_device(x, t, kWhere);
  return raw::contiguous(t);
}

// running = (1 - momentum) * running + momentum * batch * factor, in place (any strides).
template <typename T>
void update_running(const Tensor& running, const Tensor& batch, double momentum, double factor) {
  const std::int64_t c = running.sizes()[0], stride = running.strides()[0];
  T* r = running.data<T>();
  const T* b = batch.data<T>();
  for (std::int64_t i = 0; i < c; ++i)
    r[i * stride] = static_cast<T>((1.0 - momentum) * static_cast<double>(r[i * stride]) +
                                   momentum * factor * static_cast<double>(b[i]));
}

// The same update for device tensors (CUDA): running *= 1 - momentum, then
// running += momentum * factor * batch, in place with the device's elementwise kernels
// (two roundings to T instead of one; tests/cuda/test_cuda_pool_bn.cpp bounds the difference).
void update_running_on_device(const Tensor& running, const Tensor& batch, double momentum,
                              double factor) {
  mul_scalar_(running, 1.0 - momentum);
  add_(running, batch, momentum * factor);
}

}  // namespace

BatchNormForward batch_norm2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                      const Tensor& running_mean, const Tensor& running_var,
                                      bool training, double momentum, double eps) {
  check_defined(x, kWhere, "input");
  BatchNormForward f;
  f.problem =
      make_batch_norm_problem(x.sizes(), training, momentum, eps, x.dtype(), x.device(), kWhere);
  const Tensor w = channel_vector(weight, x, "weight", 1.0);
  const Tensor b = channel_vector(bias, x, "bias", 0.0);
  ANVIL_CHECK(running_mean.defined() == running_var.defined(), kWhere,
              "running_mean and running_var must be given together (got ",
              running_mean.defined() ? "only running_mean)" : "only running_var)");
  ANVIL_CHECK(training || running_mean.defined(), kWhere,
              "eval mode needs running_mean and running_var");
  if (running_mean.defined()) {  // validated even in training (they are updated)
    channel_vector(running_mean, x, "running_mean", 0.0);
    channel_vector(running_var, x, "running_var", 1.0);
  }
  const std::int64_t c = f.problem.c;
  if (training) {
    f.mean = Tensor::empty({c}, x.dtype(), x.device());
    f.var = Tensor::empty({c}, x.dtype(), x.device());
  } else {  // a private copy: later training steps may update the running statistics in place
    f.mean = raw::clone(running_mean);
    f.var = raw::clone(running_var);
  }
  f.y = Tensor::empty(x.sizes(), x.dtype(), x.device());
  if (f.problem.numel() == 0) return f;
  const Tensor xd = raw::contiguous(x);
  BatchNormArgs args;
  args.problem = f.problem;
  args.x = xd.data_ptr();
  args.y = f.y.data_ptr();
  args.weight = w.data_ptr();
  args.bias = b.data_ptr();
  args.mean = f.mean.data_ptr();
  args.var = f.var.data_ptr();
  auto trial = [&](const BatchNormTable::Variant& v) {
    Tensor sy = Tensor::empty(f.y.sizes(), x.dtype(), x.device()), sm = raw::clone(f.mean),
           sv = raw::clone(f.var);
    BatchNormArgs t = args;
    t.y = sy.data_ptr();
    t.mean = sm.data_ptr();
    t.var = sv.data_ptr();
    return time_trial(
        x.device(), [&] { v.fn(t); }, "batch_norm2d autotune");
  };
  batch_norm2d_table().run(args, trial);
  if (training && running_mean.defined()) {
    // PyTorch semantics: the running variance takes the unbiased batch variance.
    const double m = static_cast<double>(f.problem.per_channel());
    if (x.device().type != DeviceType::cpu) {  // the same formula with device elementwise ops
      update_running_on_device(running_mean, f.mean, momentum, 1.0);
      update_running_on_device(running_var, f.var, momentum, m / (m - 1.0));
      return f;
    }
    visit_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_floating_point_v<T>) {
        update_running<T>(running_mean, f.mean, momentum, 1.0);
        update_running<T>(running_var, f.var, momentum, m / (m - 1.0));
      }
    });
  }
  return f;
}

BatchNormGrads batch_norm2d_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                     const BatchNormForward& fwd) {
  check_defined(dy, kWhere, "grad_output");
  ANVIL_CHECK(dy.sizes() == x.sizes() && dy.dtype() == x.dtype(), kWhere, "grad_output ",
              shape_str(dy.sizes()), " ", dtype_name(dy.dtype()), " does not match the input ",
              shape_str(x.sizes()), " ", dtype_name(x.dtype()));
  check_same_device(x, dy, kWhere);
  ANVIL_CHECK(x.device() == fwd.problem.device, kWhere, "the input is on ", x.device(),
              " but the forward ran on ", fwd.problem.device);
  const Tensor w = channel_vector(weight, x, "weight", 1.0);
  BatchNormGrads g;
  const std::int64_t c = fwd.problem.c;
  g.dx = Tensor::empty(x.sizes(), x.dtype(), x.device());
  g.dweight = Tensor::zeros({c}, x.dtype(), x.device());
  g.dbias = Tensor::zeros({c}, x.dtype(), x.device());
  if (fwd.problem.numel() == 0) return g;
  const Tensor xd = raw::contiguous(x), dyd = raw::contiguous(dy);
  BatchNormArgs args;
  args.problem = fwd.problem.with_pass(BatchNormPass::backward);
  args.x = xd.data_ptr();
  args.weight = w.data_ptr();
  args.mean = fwd.mean.data_ptr();
  args.var = fwd.var.data_ptr();
  args.dy = dyd.data_ptr();
  args.dx = g.dx.data_ptr();
  args.dweight = g.dweight.data_ptr();
  args.dbias = g.dbias.data_ptr();
  auto trial = [&](const BatchNormTable::Variant& v) {
    Tensor sdx = Tensor::empty(x.sizes(), x.dtype(), x.device()),
           sw = Tensor::empty({c}, x.dtype(), x.device()),
           sb = Tensor::empty({c}, x.dtype(), x.device());
    BatchNormArgs t = args;
    t.dx = sdx.data_ptr();
    t.dweight = sw.data_ptr();
    t.dbias = sb.data_ptr();
    return time_trial(
        x.device(), [&] { v.fn(t); }, "batch_norm2d autotune");
  };
  batch_norm2d_table().run(args, trial);
  return g;
}

}  // namespace anvil::ops
