// SPDX-License-Identifier: Apache-2.0
// SGD, Adam and gradient clipping (engine/optim/optimizer.h), dispatched through the optimizer
// tables (engine/dispatch/optimizer_problem.h): cpu.omp by default on the CPU, the fused
// multi-tensor CUDA kernels on a GPU.
#include "engine/optim/optimizer.h"

#include <charconv>
#include <cmath>

#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/views.h"
#include "engine/dispatch/optimizer_problem.h"
#include "engine/ops/elementwise.h"
#include "engine/optim/state_text.h"

namespace anvil::optim {
namespace {

// The optimizers update dense parameters in place, on any device the tables serve.
void check_param(const Tensor& p, const Tensor& g, const char* where) {
  ANVIL_CHECK(is_floating(p.dtype()), where, "parameters must be floating point, got ",
              dtype_name(p.dtype()));
  ANVIL_CHECK(p.is_contiguous() && g.is_contiguous(), where,
              "parameter and gradient must be contiguous, got strides ", shape_str(p.strides()),
              " and ", shape_str(g.strides()));
  ANVIL_CHECK(g.sizes() == p.sizes() && g.dtype() == p.dtype(), where, "gradient ",
              shape_str(g.sizes()), " ", dtype_name(g.dtype()), " does not match parameter ",
              shape_str(p.sizes()), " ", dtype_name(p.dtype()));
  ANVIL_CHECK(g.device() == p.device(), where, "gradient on ", g.device(), " but parameter on ",
              p.device());
}

// Note [Multi-tensor optimizer calls]
// One table call per (device, dtype) group of the parameter list, in order of first
// appearance: on the CPU (one group, f32) cpu.omp then runs exactly the per-tensor passes of
// before; on a GPU the whole group is one fused launch (kernels/cuda/optimizer_kernels.cu).
struct Group {
  OptimizerProblem problem;
  std::vector<OptimTensor> tensors;
};

Group& group_for(std::vector<Group>& groups, OptimOp op, const Tensor& t) {
  for (auto& g : groups)
    if (g.problem.device == t.device() && g.problem.dtype == t.dtype()) return g;
  Group g;
  g.problem.op = op;
  g.problem.dtype = t.dtype();
  g.problem.device = t.device();
  groups.push_back(std::move(g));
  return groups.back();
}

void add_tensor(Group& g, const OptimTensor& t) {
  g.tensors.push_back(t);
  g.problem.tensors += 1;
  g.problem.numel += t.numel;
}

// Runs `args` (problem and hyper-parameters filled) once per group.
void run_groups(std::vector<Group>& groups, OptimizerArgs args) {
  for (auto& g : groups) {
    if (g.tensors.empty()) continue;
    args.problem = g.problem;
    args.tensors = g.tensors.data();
    optimizer_table(g.problem.op).run(args);
  }
}

void check_options(const SGDOptions& o, const char* where) {
  ANVIL_CHECK(o.lr >= 0 && o.momentum >= 0 && o.weight_decay >= 0, where,
              "lr, momentum and weight_decay must be >= 0, got ", o.lr, ", ", o.momentum, ", ",
              o.weight_decay);
  ANVIL_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), where,
              "Nesterov needs momentum > 0 and dampening 0");
}

void check_options(const AdamOptions& o, const char* where) {
  ANVIL_CHECK(o.lr >= 0 && o.eps >= 0 && o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1,
              where, "invalid options lr=", o.lr, " betas=(", o.beta1, ", ", o.beta2,
              ") eps=", o.eps);
}

// ---- state as text and named tensors (Note [Optimizer state]) ------------------------------

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using detail::entry;
using detail::Metadata;
using detail::read_number;
using detail::text_of;

bool read_bool(const Metadata& md, const std::string& key, const char* where) {
  const std::string& s = entry(md, key, where);
  ANVIL_CHECK(s == "true" || s == "false", where, "state '", key, "' = \"", s,
              "\" is not true/false");
  return s == "true";
}

// The parameter index of `name` when it is "<prefix><decimal index>", else -1.
std::int64_t index_after(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  const char* b = name.data() + prefix.size();
  const char* e = name.data() + name.size();
  if (*b == '0' && e - b > 1) return -1;  // one spelling per index
  std::int64_t i = -1;
  const auto r = std::from_chars(b, e, i);
  return (r.ec == std::errc() && r.ptr == e) ? i : -1;
}

// Sorts `tensors` named "<prefixes[k]><i>" into slots[k][i] as fresh copies on the parameter's
// device, checking every name, index, shape and dtype against `params`. Nothing is changed on
// error, so load_state can commit afterwards.
std::vector<std::vector<Tensor>> collect_state(const NamedTensors& tensors,
                                               const std::vector<std::string>& prefixes,
                                               const std::vector<Tensor>& params,
                                               const char* where) {
  std::string expected;  // for the error message
  for (const auto& p : prefixes) expected += (expected.empty() ? "" : ", ") + p + "<i>";
  std::vector<std::vector<Tensor>> slots(prefixes.size(), std::vector<Tensor>(params.size()));
  for (const auto& [name, t] : tensors) {
    std::size_t k = 0;
    std::int64_t i = -1;
    for (std::size_t c = 0; c < prefixes.size() && i < 0; ++c) {
      i = index_after(name, prefixes[c]);
      k = c;
    }
    ANVIL_CHECK(i >= 0, where, "unexpected state tensor '", name, "' (expected ", expected, ")");
    ANVIL_CHECK(i < static_cast<std::int64_t>(params.size()), where, "state tensor '", name,
                "' is for parameter ", i, " but this optimizer has ", params.size(), " parameters");
    ANVIL_CHECK(!slots[k][i].defined(), where, "state tensor '", name, "' given twice");
    check_defined(t, where, name.c_str());
    const Tensor& p = params[i];
    ANVIL_CHECK(t.sizes() == p.sizes() && t.dtype() == p.dtype(), where, "state tensor '", name,
                "' is ", shape_str(t.sizes()), " ", dtype_name(t.dtype()), " but parameter ", i,
                " is ", shape_str(p.sizes()), " ", dtype_name(p.dtype()));
    slots[k][i] = Tensor::empty(p.sizes(), p.dtype(), p.device());
    slots[k][i].copy_(t);
  }
  return slots;
}

}  // namespace

// Note [Optimizer state]
// Everything step() reads besides the parameters and gradients is state: the options (a
// scheduler changes lr), Adam's step count t and the per-parameter tensors. Those tensors are
// created lazily on a parameter's first update, and "not created yet" is itself state: SGD's
// first momentum update copies the gradient instead of blending it, and a parameter that never
// got a gradient must stay stateless. state() therefore lists only tensors that exist and
// load_state() leaves the others undefined, which makes a resumed run bit-exact.
void Optimizer::check_state_header(const std::map<std::string, std::string>& metadata) const {
  const std::string where = type_name() + "::load_state";
  const std::string& type = entry(metadata, "type", where.c_str());
  ANVIL_CHECK(type == type_name(), where.c_str(), "the state was saved by ", type,
              ", this optimizer is ", type_name());
  const auto n = read_number<std::int64_t>(metadata, "num_params", where.c_str());
  ANVIL_CHECK(n == static_cast<std::int64_t>(params_.size()), where.c_str(), "the state is for ", n,
              " parameters, this optimizer has ", params_.size());
}

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (const auto& p : params_) check_defined(p, "Optimizer", "parameter");
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& p : params_) {
    Tensor& g = p.mutable_grad();
    if (set_to_none)
      g = Tensor();
    else if (g.defined())
      g.zero_();
  }
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params)), opt_(options) {
  check_options(opt_, "SGD");
  momentum_.resize(params_.size());
}

std::vector<std::pair<std::string, Tensor>> SGD::state() const {
  NamedTensors out;
  for (std::size_t i = 0; i < momentum_.size(); ++i)
    if (momentum_[i].defined()) out.emplace_back("sgd.momentum." + std::to_string(i), momentum_[i]);
  return out;
}

std::map<std::string, std::string> SGD::state_metadata() const {
  return {{"type", type_name()},
          {"num_params", std::to_string(params_.size())},
          {"lr", text_of(opt_.lr)},
          {"momentum", text_of(opt_.momentum)},
          {"dampening", text_of(opt_.dampening)},
          {"weight_decay", text_of(opt_.weight_decay)},
          {"nesterov", opt_.nesterov ? "true" : "false"}};
}

void SGD::load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                     const std::map<std::string, std::string>& metadata) {
  const char* where = "SGD::load_state";
  check_state_header(metadata);
  SGDOptions o;
  o.lr = read_number<double>(metadata, "lr", where);
  o.momentum = read_number<double>(metadata, "momentum", where);
  o.dampening = read_number<double>(metadata, "dampening", where);
  o.weight_decay = read_number<double>(metadata, "weight_decay", where);
  o.nesterov = read_bool(metadata, "nesterov", where);
  check_options(o, where);
  ANVIL_CHECK(!folded_ || (o.momentum == 0 && o.weight_decay == 0 && !o.nesterov), where,
              "this optimizer is folded into backward, which needs plain SGD, but the state has "
              "momentum=",
              o.momentum, " weight_decay=", o.weight_decay, " nesterov=", o.nesterov);
  auto slots = collect_state(tensors, {"sgd.momentum."}, params_, where);
  if (o.momentum == 0)
    for (const auto& m : slots[0])
      ANVIL_CHECK(!m.defined(), where, "the state has momentum tensors but momentum 0");
  opt_ = o;
  momentum_ = std::move(slots[0]);
  if (folded_) fold_into_backward(true);  // the folded update reads lr from the parameters
}

void SGD::fold_into_backward(bool on) {
  ANVIL_CHECK(!on || (opt_.momentum == 0 && opt_.weight_decay == 0 && !opt_.nesterov),
              "SGD::fold_into_backward",
              "only plain SGD can be folded, got momentum=", opt_.momentum,
              " weight_decay=", opt_.weight_decay, " nesterov=", opt_.nesterov);
  folded_ = on;
  for (auto& p : params_) ensure_autograd_meta(p).folded_sgd_lr = on ? opt_.lr : 0.0;
}

void SGD::set_lr(double lr) {
  opt_.lr = lr;
  if (folded_) fold_into_backward(true);
}

void SGD::step() {
  NoGradGuard no_grad;
  std::vector<Group> groups;
  const bool momentum = opt_.momentum != 0.0;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    const Tensor& g = p.grad();
    if (!g.defined()) continue;  // parameter not reached by backward
    check_param(p, g, "SGD::step");
    const bool first = !momentum_[i].defined();
    if (momentum && first) momentum_[i] = Tensor::empty(p.sizes(), p.dtype(), p.device());
    Group& grp = group_for(groups, OptimOp::sgd, p);
    grp.problem.momentum = momentum;
    add_tensor(grp, {p.data_ptr(), g.data_ptr(), momentum ? momentum_[i].data_ptr() : nullptr,
                     nullptr, p.numel(), first});
  }
  OptimizerArgs args;
  args.sgd = {opt_.lr, opt_.momentum, opt_.dampening, opt_.weight_decay, opt_.nesterov};
  run_groups(groups, args);
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Optimizer(std::move(params)), opt_(options) {
  check_options(opt_, "Adam");
  m_.resize(params_.size());
  v_.resize(params_.size());
}

std::vector<std::pair<std::string, Tensor>> Adam::state() const {
  NamedTensors out;
  for (std::size_t i = 0; i < m_.size(); ++i)
    if (m_[i].defined()) {
      out.emplace_back("adam.m." + std::to_string(i), m_[i]);
      out.emplace_back("adam.v." + std::to_string(i), v_[i]);
    }
  return out;
}

std::map<std::string, std::string> Adam::state_metadata() const {
  return {{"type", type_name()},
          {"num_params", std::to_string(params_.size())},
          {"lr", text_of(opt_.lr)},
          {"beta1", text_of(opt_.beta1)},
          {"beta2", text_of(opt_.beta2)},
          {"eps", text_of(opt_.eps)},
          {"weight_decay", text_of(opt_.weight_decay)},
          {"step", std::to_string(t_)}};
}

void Adam::load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const char* where = "Adam::load_state";
  check_state_header(metadata);
  AdamOptions o;
  o.lr = read_number<double>(metadata, "lr", where);
  o.beta1 = read_number<double>(metadata, "beta1", where);
  o.beta2 = read_number<double>(metadata, "beta2", where);
  o.eps = read_number<double>(metadata, "eps", where);
  o.weight_decay = read_number<double>(metadata, "weight_decay", where);
  check_options(o, where);
  const auto t = read_number<std::int64_t>(metadata, "step", where);
  ANVIL_CHECK(t >= 0, where, "step must be >= 0, got ", t);
  auto slots = collect_state(tensors, {"adam.m.", "adam.v."}, params_, where);
  for (std::size_t i = 0; i < params_.size(); ++i)
    ANVIL_CHECK(slots[0][i].defined() == slots[1][i].defined(), where, "parameter ", i, " has ",
                slots[0][i].defined() ? "adam.m but no adam.v" : "adam.v but no adam.m");
  opt_ = o;
  t_ = t;
  m_ = std::move(slots[0]);
  v_ = std::move(slots[1]);
}

void Adam::step() {
  NoGradGuard no_grad;
  ++t_;
  const double c1 = 1.0 - std::pow(opt_.beta1, static_cast<double>(t_));
  const double c2 = 1.0 - std::pow(opt_.beta2, static_cast<double>(t_));
  std::vector<Group> groups;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    check_param(p, g, "Adam::step");
    if (!m_[i].defined()) {
      m_[i] = Tensor::zeros(p.sizes(), p.dtype(), p.device());
      v_[i] = Tensor::zeros(p.sizes(), p.dtype(), p.device());
    }
    add_tensor(group_for(groups, OptimOp::adam, p),
               {p.data_ptr(), g.data_ptr(), m_[i].data_ptr(), v_[i].data_ptr(), p.numel(), false});
  }
  OptimizerArgs args;
  args.adam = {opt_.lr, opt_.beta1, opt_.beta2, opt_.eps, opt_.weight_decay, c1, c2};
  run_groups(groups, args);
}

Tensor clip_grad_norm_async_(const std::vector<Tensor>& params, double max_norm) {
  ANVIL_CHECK(max_norm > 0, "clip_grad_norm_async_", "max_norm must be positive, got ", max_norm);
  NoGradGuard no_grad;
  std::vector<Group> norm_groups, scale_groups;
  bool device_path = true;
  Device device = Device::cpu();
  for (const auto& p : params) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    ANVIL_CHECK(is_floating(g.dtype()), "clip_grad_norm_async_",
                "gradients must be floating point, got ", dtype_name(g.dtype()));
    if (!g.device().is_cuda() || !g.is_contiguous() || (device.is_cuda() && g.device() != device)) {
      device_path = false;
      break;
    }
    device = g.device();
    add_tensor(group_for(norm_groups, OptimOp::grad_norm, g),
               {nullptr, g.data_ptr(), nullptr, nullptr, g.numel(), false});
    add_tensor(group_for(scale_groups, OptimOp::grad_scale, g),
               {nullptr, g.data_ptr(), nullptr, nullptr, g.numel(), false});
  }
  if (!device_path || !device.is_cuda())
    return Tensor::scalar(clip_grad_norm_(params, max_norm), DType::f64);
  // One f64 accumulator on the device; each (dtype) group adds its sum of squares to it.
  Tensor sum = Tensor::zeros({}, DType::f64, device);
  for (auto& grp : norm_groups) {
    OptimizerArgs args;
    args.problem = grp.problem;
    args.tensors = grp.tensors.data();
    args.sum_device = sum.data_ptr();
    grad_norm_table().run(args);
  }
  OptimizerArgs args;
  args.clip_sum = sum.data_ptr();
  args.clip_max_norm = max_norm;
  run_groups(scale_groups, args);
  return ops::unary(EwOp::sqrt, sum);
}

std::vector<Tensor> unscale_grads_(const std::vector<Tensor>& params, double factor) {
  const char* where = "unscale_grads_";
  ANVIL_CHECK(std::isfinite(factor) && factor > 0, where,
              "factor must be a positive finite number, got ", factor);
  NoGradGuard no_grad;
  // One grad_scale call per (device, dtype) group, each with its device's flag. A strided
  // gradient (rare) is unscaled as a dense copy, written back after the check.
  std::vector<Group> groups;
  std::vector<std::pair<Tensor, Tensor>> strided;  // (gradient, its dense copy)
  for (const auto& p : params) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    ANVIL_CHECK(is_floating(g.dtype()), where,
                "gradients must be f32 or f64 (f32 master weights), got ", dtype_name(g.dtype()));
    Tensor dense = g;
    if (!g.is_contiguous()) {
      dense = raw::contiguous(g);
      strided.emplace_back(g, dense);
    }
    add_tensor(group_for(groups, OptimOp::grad_scale, dense),
               {nullptr, dense.data_ptr(), nullptr, nullptr, dense.numel(), false});
  }
  std::vector<Tensor> flags;  // one per device, in order of first appearance
  for (auto& grp : groups) {
    Tensor* flag = nullptr;
    for (Tensor& f : flags)
      if (f.device() == grp.problem.device) flag = &f;
    if (flag == nullptr)
      flag = &flags.emplace_back(Tensor::zeros({}, DType::f32, grp.problem.device));
    OptimizerArgs args;
    args.problem = grp.problem;
    args.tensors = grp.tensors.data();
    args.scale = factor;
    args.found_inf = flag->data_ptr();
    grad_scale_table().run(args);
  }
  for (auto& [g, dense] : strided) {
    Tensor dst = g;
    dst.copy_(dense);
  }
  return flags;
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  ANVIL_CHECK(max_norm > 0, "clip_grad_norm_", "max_norm must be positive, got ", max_norm);
  NoGradGuard no_grad;
  // One grad_norm call per (device, dtype) group: on a GPU one reduction over every gradient,
  // its result read back once. A non-contiguous gradient (rare: autograd makes dense ones) is
  // summed from a dense copy and scaled through the elementwise table.
  std::vector<Group> norm_groups, scale_groups;
  std::vector<Tensor> copies;   // keeps the dense copies alive during the calls
  std::vector<Tensor> strided;  // gradients scaled one by one
  for (const auto& p : params) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    ANVIL_CHECK(is_floating(g.dtype()), "clip_grad_norm_", "gradients must be floating point, got ",
                dtype_name(g.dtype()));
    if (g.is_contiguous()) {
      add_tensor(group_for(norm_groups, OptimOp::grad_norm, g),
                 {nullptr, g.data_ptr(), nullptr, nullptr, g.numel(), false});
      add_tensor(group_for(scale_groups, OptimOp::grad_scale, g),
                 {nullptr, g.data_ptr(), nullptr, nullptr, g.numel(), false});
    } else {
      copies.push_back(raw::contiguous(g));
      const Tensor& c = copies.back();
      add_tensor(group_for(norm_groups, OptimOp::grad_norm, c),
                 {nullptr, c.data_ptr(), nullptr, nullptr, c.numel(), false});
      strided.push_back(g);
    }
  }
  double total = 0.0;
  for (auto& grp : norm_groups) {
    double sum = 0.0;
    OptimizerArgs args;
    args.problem = grp.problem;
    args.tensors = grp.tensors.data();
    args.result = &sum;
    grad_norm_table().run(args);
    total += sum;
  }
  const double norm = std::sqrt(total);
  const double scale = max_norm / (norm + 1e-6);
  if (scale < 1.0) {
    OptimizerArgs args;
    args.scale = scale;
    run_groups(scale_groups, args);
    for (const auto& g : strided) ops::mul_scalar_(g, scale);
  }
  return norm;
}

}  // namespace anvil::optim
