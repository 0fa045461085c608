// SPDX-License-Identifier: Apache-2.0
// The optimizer base (parameter groups, state headers), SGD and gradient clipping
// (engine/optim/optimizer.h), dispatched through the optimizer tables
// (engine/dispatch/optimizer_problem.h): cpu.omp by default on the CPU, the fused multi-tensor
// CUDA kernels on a GPU. Adam and AdamW are in adam.cpp.
#include "engine/optim/optimizer.h"

#include <cmath>
#include <set>

#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/views.h"
#include "engine/ops/elementwise.h"
#include "engine/optim/optimizer_state.h"
#include "engine/optim/update_calls.h"

namespace anvil::optim {

using detail::add_tensor;
using detail::call_for;
using detail::check_param;
using detail::collect_state;
using detail::entry;
using detail::read_bool;
using detail::read_number;
using detail::run_calls;
using detail::TableCall;
using detail::text_of;
using NamedTensors = detail::NamedTensors;
using Metadata = detail::Metadata;

namespace {

void check_options(const SGDOptions& o, const char* where) {
  ANVIL_CHECK(o.lr >= 0 && o.momentum >= 0 && o.weight_decay >= 0, where,
              "lr, momentum and weight_decay must be >= 0, got ", o.lr, ", ", o.momentum, ", ",
              o.weight_decay);
  ANVIL_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), where,
              "Nesterov needs momentum > 0 and dampening 0");
}

}  // namespace

// Note [Optimizer state]
// Everything step() reads besides the parameters and gradients is state: the options (a
// scheduler changes lr), Adam's step count t and the per-parameter tensors. Those tensors are
// created lazily on a parameter's first update, and "not created yet" is itself state: SGD's
// first momentum update copies the gradient instead of blending it, and a parameter that never
// got a gradient must stay stateless. state() therefore lists only tensors that exist and
// load_state() leaves the others undefined, which makes a resumed run bit-exact.
// Note [Group state keys]
// Group 0's options keep the keys a one-group optimizer has always written ("lr", "beta1", ...),
// so checkpoints of one group read and write as before; group g > 0 writes "group.<g>.lr" and
// so on. "num_groups" (absent in older files: 1) and, with several groups, each group's
// "group.<g>.num_params" make a state load only into an optimizer of the same grouping; the
// per-parameter tensors count over params(), the groups' concatenation.
Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (const auto& p : params_) check_defined(p, "Optimizer", "parameter");
  group_begin_ = {0, params_.size()};
  group_of_.assign(params_.size(), 0);
}

Optimizer::Optimizer(std::vector<std::vector<Tensor>> groups) {
  ANVIL_CHECK(!groups.empty(), "Optimizer", "needs at least one parameter group");
  group_begin_.push_back(0);
  std::set<const void*> seen;  // a parameter updated twice per step would be a silent bug
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (auto& p : groups[g]) {
      check_defined(p, "Optimizer", "parameter");
      ANVIL_CHECK(groups.size() == 1 || p.numel() == 0 || seen.insert(p.data_ptr()).second,
                  "Optimizer", "a parameter ", shape_str(p.sizes()), " of group ", g,
                  " is also in an earlier group");
      params_.push_back(std::move(p));
      group_of_.push_back(g);
    }
    group_begin_.push_back(params_.size());
  }
}

void Optimizer::append_group(std::vector<Tensor> params, const char* where) {
  std::set<const void*> seen;
  for (const auto& p : params_)
    if (p.numel() > 0) seen.insert(p.data_ptr());
  for (const auto& p : params) {
    check_defined(p, where, "parameter");
    ANVIL_CHECK(p.numel() == 0 || seen.insert(p.data_ptr()).second, where, "a parameter ",
                shape_str(p.sizes()), " of the new group ", num_groups(),
                " is already in a group of this optimizer");
  }
  for (auto& p : params) {
    params_.push_back(std::move(p));
    group_of_.push_back(num_groups());
  }
  group_begin_.push_back(params_.size());
}

std::size_t Optimizer::group_begin(std::size_t g) const {
  ANVIL_CHECK(g <= num_groups(), "Optimizer::group_begin", "group ", g, " of ", num_groups());
  return group_begin_[g];
}

std::vector<Tensor> Optimizer::group_params(std::size_t g) const {
  ANVIL_CHECK(g < num_groups(), "Optimizer::group_params", "group ", g, " but the optimizer has ",
              num_groups(), " groups");
  return {params_.begin() + static_cast<std::ptrdiff_t>(group_begin_[g]),
          params_.begin() + static_cast<std::ptrdiff_t>(group_begin_[g + 1])};
}

void Optimizer::set_lr(double lr) {
  for (std::size_t g = 0; g < num_groups(); ++g) set_group_lr(g, lr);
}

void Optimizer::check_group_lr(std::size_t g, double lr, const char* where) const {
  ANVIL_CHECK(g < num_groups(), where, "group ", g, " but the optimizer has ", num_groups(),
              " groups");
  ANVIL_CHECK(lr >= 0 && std::isfinite(lr), where, "lr must be finite and >= 0, got ", lr);
}

std::string Optimizer::group_prefix(std::size_t g) {
  return g == 0 ? std::string() : "group." + std::to_string(g) + ".";
}

std::map<std::string, std::string> Optimizer::state_header() const {
  Metadata md = {{"type", type_name()},
                 {"num_params", std::to_string(params_.size())},
                 {"num_groups", std::to_string(num_groups())}};
  if (num_groups() > 1)
    for (std::size_t g = 0; g < num_groups(); ++g)
      md["group." + std::to_string(g) + ".num_params"] =
          std::to_string(group_begin_[g + 1] - group_begin_[g]);
  return md;
}

void Optimizer::check_state_header(const std::map<std::string, std::string>& metadata) const {
  const std::string where = type_name() + "::load_state";
  const std::string& type = entry(metadata, "type", where.c_str());
  ANVIL_CHECK(type == type_name(), where.c_str(), "the state was saved by ", type,
              ", this optimizer is ", type_name());
  const auto n = read_number<std::int64_t>(metadata, "num_params", where.c_str());
  ANVIL_CHECK(n == static_cast<std::int64_t>(params_.size()), where.c_str(), "the state is for ", n,
              " parameters, this optimizer has ", params_.size());
  const auto groups = metadata.count("num_groups") != 0
                          ? read_number<std::int64_t>(metadata, "num_groups", where.c_str())
                          : 1;  // Note [Group state keys]: older files
  ANVIL_CHECK(groups == static_cast<std::int64_t>(num_groups()), where.c_str(), "the state has ",
              groups, " parameter groups, this optimizer has ", num_groups());
  if (num_groups() > 1)
    for (std::size_t g = 0; g < num_groups(); ++g) {
      const std::string key = "group." + std::to_string(g) + ".num_params";
      const auto size = read_number<std::int64_t>(metadata, key, where.c_str());
      const auto mine = static_cast<std::int64_t>(group_begin_[g + 1] - group_begin_[g]);
      ANVIL_CHECK(size == mine, where.c_str(), "group ", g, " has ", size,
                  " parameters in the state, ", mine, " in this optimizer");
    }
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

// ---- SGD ------------------------------------------------------------------------------------

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params)), groups_{options}, defaults_(options) {
  check_options(options, "SGD");
  momentum_.resize(params_.size());
}

SGD::SGD(std::vector<ParamGroup<SGDOptions>> groups, SGDOptions defaults)
    : Optimizer(detail::tensors_of(groups)),
      groups_(detail::options_of(groups, defaults)),
      defaults_(defaults) {
  for (std::size_t g = 0; g < groups_.size(); ++g)
    check_options(groups_[g], ("SGD group " + std::to_string(g)).c_str());
  momentum_.resize(params_.size());
}

void SGD::add_param_group(ParamGroup<SGDOptions> group) {
  const char* where = "SGD::add_param_group";
  const SGDOptions o = group.options.value_or(defaults_);
  check_options(o, where);
  ANVIL_CHECK(!folded_ || (o.momentum == 0 && o.weight_decay == 0 && !o.nesterov), where,
              "this optimizer is folded into backward, which needs plain SGD, but the group has "
              "momentum=",
              o.momentum, " weight_decay=", o.weight_decay, " nesterov=", o.nesterov);
  const std::size_t first = params_.size();
  append_group(std::move(group.params), where);  // checks before it changes anything
  groups_.push_back(o);
  momentum_.resize(params_.size());  // no buffers: the first step copies the gradient
  if (folded_)
    for (std::size_t i = first; i < params_.size(); ++i)
      ensure_autograd_meta(params_[i]).folded_sgd_lr = o.lr;
}

std::vector<std::pair<std::string, Tensor>> SGD::state() const {
  NamedTensors out;
  for (std::size_t i = 0; i < momentum_.size(); ++i)
    if (momentum_[i].defined()) out.emplace_back("sgd.momentum." + std::to_string(i), momentum_[i]);
  return out;
}

std::map<std::string, std::string> SGD::state_metadata() const {
  Metadata md = state_header();
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const SGDOptions& o = groups_[g];
    const std::string k = group_prefix(g);
    md[k + "lr"] = text_of(o.lr);
    md[k + "momentum"] = text_of(o.momentum);
    md[k + "dampening"] = text_of(o.dampening);
    md[k + "weight_decay"] = text_of(o.weight_decay);
    md[k + "nesterov"] = o.nesterov ? "true" : "false";
  }
  return md;
}

void SGD::load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                     const std::map<std::string, std::string>& metadata) {
  const char* where = "SGD::load_state";
  check_state_header(metadata);
  std::vector<SGDOptions> groups;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const std::string k = group_prefix(g);
    SGDOptions o;
    o.lr = read_number<double>(metadata, k + "lr", where);
    o.momentum = read_number<double>(metadata, k + "momentum", where);
    o.dampening = read_number<double>(metadata, k + "dampening", where);
    o.weight_decay = read_number<double>(metadata, k + "weight_decay", where);
    o.nesterov = read_bool(metadata, k + "nesterov", where);
    check_options(o, where);
    ANVIL_CHECK(!folded_ || (o.momentum == 0 && o.weight_decay == 0 && !o.nesterov), where,
                "this optimizer is folded into backward, which needs plain SGD, but the state has "
                "momentum=",
                o.momentum, " weight_decay=", o.weight_decay, " nesterov=", o.nesterov);
    groups.push_back(o);
  }
  auto slots = collect_state(tensors, {"sgd.momentum."}, params_, where);
  for (std::size_t i = 0; i < params_.size(); ++i)
    ANVIL_CHECK(!slots[0][i].defined() || groups[group_of_[i]].momentum != 0, where,
                "the state has a momentum tensor for parameter ", i, " but its group ",
                group_of_[i], " has momentum 0");
  groups_ = std::move(groups);
  momentum_ = std::move(slots[0]);
  if (folded_) fold_into_backward(true);  // the folded update reads lr from the parameters
}

void SGD::fold_into_backward(bool on) {
  for (const SGDOptions& o : groups_)
    ANVIL_CHECK(!on || (o.momentum == 0 && o.weight_decay == 0 && !o.nesterov),
                "SGD::fold_into_backward",
                "only plain SGD can be folded, got momentum=", o.momentum,
                " weight_decay=", o.weight_decay, " nesterov=", o.nesterov);
  folded_ = on;
  for (std::size_t i = 0; i < params_.size(); ++i)
    ensure_autograd_meta(params_[i]).folded_sgd_lr = on ? groups_[group_of_[i]].lr : 0.0;
}

void SGD::set_group_lr(std::size_t g, double lr) {
  check_group_lr(g, lr, "SGD::set_group_lr");
  groups_[g].lr = lr;
  if (folded_) fold_into_backward(true);
}

void SGD::step() {
  NoGradGuard no_grad;
  for (std::size_t grp = 0; grp < groups_.size(); ++grp) {
    const SGDOptions& o = groups_[grp];
    std::vector<TableCall> calls;
    const bool momentum = o.momentum != 0.0;
    for (std::size_t i = group_begin_[grp]; i < group_begin_[grp + 1]; ++i) {
      Tensor& p = params_[i];
      const Tensor& g = p.grad();
      if (!g.defined()) continue;  // parameter not reached by backward
      check_param(p, g, "SGD::step");
      const bool first = !momentum_[i].defined();
      if (momentum && first) momentum_[i] = Tensor::empty(p.sizes(), p.dtype(), p.device());
      TableCall& call = call_for(calls, OptimOp::sgd, p);
      call.problem.momentum = momentum;
      add_tensor(call, {p.data_ptr(), g.data_ptr(), momentum ? momentum_[i].data_ptr() : nullptr,
                        nullptr, p.numel(), first});
    }
    OptimizerArgs args;
    args.sgd = {o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov};
    run_calls(calls, args);
  }
}

// ---- gradient clipping ----------------------------------------------------------------------

Tensor clip_grad_norm_async_(const std::vector<Tensor>& params, double max_norm) {
  ANVIL_CHECK(max_norm > 0, "clip_grad_norm_async_", "max_norm must be positive, got ", max_norm);
  NoGradGuard no_grad;
  std::vector<TableCall> norm_groups, scale_groups;
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
    add_tensor(call_for(norm_groups, OptimOp::grad_norm, g),
               {nullptr, g.data_ptr(), nullptr, nullptr, g.numel(), false});
    add_tensor(call_for(scale_groups, OptimOp::grad_scale, g),
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
  run_calls(scale_groups, args);
  return ops::unary(EwOp::sqrt, sum);
}

std::vector<Tensor> unscale_grads_(const std::vector<Tensor>& params, double factor) {
  const char* where = "unscale_grads_";
  ANVIL_CHECK(std::isfinite(factor) && factor > 0, where,
              "factor must be a positive finite number, got ", factor);
  NoGradGuard no_grad;
  // One grad_scale call per (device, dtype) group, each with its device's flag. A strided
  // gradient (rare) is unscaled as a dense copy, written back after the check.
  std::vector<TableCall> groups;
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
    add_tensor(call_for(groups, OptimOp::grad_scale, dense),
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
  std::vector<TableCall> norm_groups, scale_groups;
  std::vector<Tensor> copies;   // keeps the dense copies alive during the calls
  std::vector<Tensor> strided;  // gradients scaled one by one
  for (const auto& p : params) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    ANVIL_CHECK(is_floating(g.dtype()), "clip_grad_norm_", "gradients must be floating point, got ",
                dtype_name(g.dtype()));
    if (g.is_contiguous()) {
      add_tensor(call_for(norm_groups, OptimOp::grad_norm, g),
                 {nullptr, g.data_ptr(), nullptr, nullptr, g.numel(), false});
      add_tensor(call_for(scale_groups, OptimOp::grad_scale, g),
                 {nullptr, g.data_ptr(), nullptr, nullptr, g.numel(), false});
    } else {
      copies.push_back(raw::contiguous(g));
      const Tensor& c = copies.back();
      add_tensor(call_for(norm_groups, OptimOp::grad_norm, c),
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
    run_calls(scale_groups, args);
    for (const auto& g : strided) ops::mul_scalar_(g, scale);
  }
  return norm;
}

}  // namespace anvil::optim
