// SPDX-License-Identifier: Apache-2.0
// Adam and AdamW (engine/optim/optimizer.h): one implementation, AdamBase, dispatched through
// the adam_update table (engine/dispatch/optimizer_problem.h) with the problem's
// decoupled_decay flag telling the two apart.
#include <cmath>
#include <map>

#include "engine/autograd/grad_mode.h"
#include "engine/optim/optimizer.h"
#include "engine/optim/optimizer_state.h"
#include "engine/optim/update_calls.h"

namespace anvil::optim {

using detail::add_tensor;
using detail::call_for;
using detail::check_param;
using detail::collect_state;
using detail::read_number;
using detail::run_calls;
using detail::TableCall;
using detail::text_of;

// Note [Decoupled weight decay]
// Adam's weight_decay (torch.optim.Adam) is L2 regularisation: wd * p is added to the gradient
// before the moments, so the decay is rescaled by 1 / sqrt(v) like the gradient, and a weight
// with large gradients is barely decayed. AdamW (Loshchilov & Hutter; torch.optim.AdamW) decays
// the weight itself, p *= 1 - lr * wd, and then takes Adam's step on the raw gradient. Both are
// one kernel per device: the adam_update problem carries decoupled_decay, and the kernels take
// the L2 coefficient (0 for AdamW) and the factor keep = 1 - lr * wd (1 for Adam, which leaves
// p * keep - x bit-equal to Adam's p - x).
//
// Note [Per-parameter Adam steps]
// The bias corrections 1 - beta^t use each parameter's own t, as torch.optim.Adam's
// state['step']: t counts the steps in which that parameter had a gradient, so a parameter that
// got none in a step (a frozen branch, an embedding row set, a layer added to the model later)
// is not corrected as if it had been updated all along. A group added with add_param_group
// starts at 0. Within a group, parameters with equal counts share one kernel call per
// (device, dtype); the counts differ only after such steps. The counts are checkpointed as
// "adam.step.<i>" per parameter with state; a checkpoint from before them has only the global
// "step", which every parameter with state then takes, as the old update did.
namespace {

void check_options(const AdamOptions& o, const char* where) {
  ANVIL_CHECK(o.lr >= 0 && o.eps >= 0 && o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1,
              where, "invalid options lr=", o.lr, " betas=(", o.beta1, ", ", o.beta2,
              ") eps=", o.eps);
  ANVIL_CHECK(o.weight_decay >= 0 && std::isfinite(o.weight_decay), where,
              "weight_decay must be finite and >= 0, got ", o.weight_decay);
}

AdamOptions as_adam(const AdamWOptions& o) {
  return {
      .lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay};
}

std::vector<AdamOptions> as_adam(const std::vector<AdamWOptions>& groups) {
  std::vector<AdamOptions> out;
  out.reserve(groups.size());
  for (const auto& o : groups) out.push_back(as_adam(o));
  return out;
}

}  // namespace

AdamBase::AdamBase(std::vector<std::vector<Tensor>> params, std::vector<AdamOptions> groups,
                   bool decoupled_decay)
    : Optimizer(std::move(params)), groups_(std::move(groups)), decoupled_decay_(decoupled_decay) {
  const char* where = decoupled_decay_ ? "AdamW" : "Adam";
  ANVIL_CHECK(groups_.size() == num_groups(), where, groups_.size(), " option sets for ",
              num_groups(), " parameter groups");
  for (std::size_t g = 0; g < groups_.size(); ++g) check_options(groups_[g], where);
  m_.resize(params_.size());
  v_.resize(params_.size());
  param_steps_.assign(params_.size(), 0);
}

void AdamBase::add_group(std::vector<Tensor> params, const AdamOptions& options) {
  const std::string where = type_name() + "::add_param_group";
  check_options(options, where.c_str());
  append_group(std::move(params), where.c_str());  // checks before it changes anything
  groups_.push_back(options);
  m_.resize(params_.size());
  v_.resize(params_.size());
  param_steps_.resize(params_.size(), 0);
}

std::int64_t AdamBase::param_steps(std::size_t i) const {
  ANVIL_CHECK(i < params_.size(), (type_name() + "::param_steps").c_str(), "parameter ", i, " of ",
              params_.size());
  return param_steps_[i];
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : AdamBase({std::move(params)}, {options}, false), defaults_(options) {}

Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups, AdamOptions defaults)
    : AdamBase(detail::tensors_of(groups), detail::options_of(groups, defaults), false),
      defaults_(defaults) {}

void Adam::add_param_group(ParamGroup<AdamOptions> group) {
  add_group(std::move(group.params), group.options.value_or(defaults_));
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : AdamBase({std::move(params)}, {as_adam(options)}, true), defaults_(options) {}

AdamW::AdamW(std::vector<ParamGroup<AdamWOptions>> groups, AdamWOptions defaults)
    : AdamBase(detail::tensors_of(groups), as_adam(detail::options_of(groups, defaults)), true),
      defaults_(defaults) {}

void AdamW::add_param_group(ParamGroup<AdamWOptions> group) {
  add_group(std::move(group.params), as_adam(group.options.value_or(defaults_)));
}

AdamWOptions AdamW::group_options(std::size_t g) const {
  const AdamOptions& o = groups_.at(g);
  return {
      .lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay};
}

void AdamBase::set_group_lr(std::size_t g, double lr) {
  check_group_lr(g, lr, (type_name() + "::set_group_lr").c_str());
  groups_[g].lr = lr;
}

std::vector<std::pair<std::string, Tensor>> AdamBase::state() const {
  detail::NamedTensors out;
  for (std::size_t i = 0; i < m_.size(); ++i)
    if (m_[i].defined()) {
      out.emplace_back("adam.m." + std::to_string(i), m_[i]);
      out.emplace_back("adam.v." + std::to_string(i), v_[i]);
    }
  return out;
}

std::map<std::string, std::string> AdamBase::state_metadata() const {
  detail::Metadata md = state_header();
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const AdamOptions& o = groups_[g];
    const std::string k = group_prefix(g);
    md[k + "lr"] = text_of(o.lr);
    md[k + "beta1"] = text_of(o.beta1);
    md[k + "beta2"] = text_of(o.beta2);
    md[k + "eps"] = text_of(o.eps);
    md[k + "weight_decay"] = text_of(o.weight_decay);
  }
  md["step"] = std::to_string(t_);
  for (std::size_t i = 0; i < m_.size(); ++i)
    if (m_[i].defined()) md["adam.step." + std::to_string(i)] = std::to_string(param_steps_[i]);
  return md;
}

void AdamBase::load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                          const std::map<std::string, std::string>& metadata) {
  const std::string where_s = type_name() + "::load_state";
  const char* where = where_s.c_str();
  check_state_header(metadata);
  std::vector<AdamOptions> groups;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const std::string k = group_prefix(g);
    AdamOptions o;
    o.lr = read_number<double>(metadata, k + "lr", where);
    o.beta1 = read_number<double>(metadata, k + "beta1", where);
    o.beta2 = read_number<double>(metadata, k + "beta2", where);
    o.eps = read_number<double>(metadata, k + "eps", where);
    o.weight_decay = read_number<double>(metadata, k + "weight_decay", where);
    check_options(o, where);
    groups.push_back(o);
  }
  const auto t = read_number<std::int64_t>(metadata, "step", where);
  ANVIL_CHECK(t >= 0, where, "step must be >= 0, got ", t);
  auto slots = collect_state(tensors, {"adam.m.", "adam.v."}, params_, where);
  for (std::size_t i = 0; i < params_.size(); ++i)
    ANVIL_CHECK(slots[0][i].defined() == slots[1][i].defined(), where, "parameter ", i, " has ",
                slots[0][i].defined() ? "adam.m but no adam.v" : "adam.v but no adam.m");
  // Note [Per-parameter Adam steps]: "adam.step.<i>" for every parameter with state, or none
  // (a checkpoint from before the per-parameter counts: each takes the global step).
  std::vector<std::int64_t> param_steps(params_.size(), 0);
  bool any_own = false;
  for (std::size_t i = 0; i < params_.size(); ++i)
    any_own = any_own || metadata.count("adam.step." + std::to_string(i)) > 0;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::string key = "adam.step." + std::to_string(i);
    const bool has_state = slots[0][i].defined();
    if (!any_own) {
      param_steps[i] = has_state ? t : 0;
      continue;
    }
    ANVIL_CHECK(has_state == (metadata.count(key) > 0), where, "parameter ", i,
                has_state ? " has adam.m but no " : " has no adam.m but has ", key);
    if (!has_state) continue;
    param_steps[i] = read_number<std::int64_t>(metadata, key, where);
    ANVIL_CHECK(param_steps[i] >= 1 && param_steps[i] <= t, where, key,
                " must be in [1, step = ", t, "], got ", param_steps[i]);
  }
  groups_ = std::move(groups);
  t_ = t;
  m_ = std::move(slots[0]);
  v_ = std::move(slots[1]);
  param_steps_ = std::move(param_steps);
}

void AdamBase::step() {
  NoGradGuard no_grad;
  ++t_;
  const std::string where = type_name() + "::step";
  for (std::size_t grp = 0; grp < groups_.size(); ++grp) {
    const AdamOptions& o = groups_[grp];
    // One list of table calls per step count (Note [Per-parameter Adam steps]): each count has
    // its own bias corrections. Usually every parameter of the group is in the same one.
    std::map<std::int64_t, std::vector<TableCall>> calls_by_step;
    for (std::size_t i = group_begin_[grp]; i < group_begin_[grp + 1]; ++i) {
      Tensor& p = params_[i];
      const Tensor& g = p.grad();
      if (!g.defined()) continue;
      check_param(p, g, where.c_str());
      if (!m_[i].defined()) {
        m_[i] = Tensor::zeros(p.sizes(), p.dtype(), p.device());
        v_[i] = Tensor::zeros(p.sizes(), p.dtype(), p.device());
      }
      TableCall& call = call_for(calls_by_step[++param_steps_[i]], OptimOp::adam, p);
      call.problem.decoupled_decay = decoupled_decay_;
      add_tensor(
          call, {p.data_ptr(), g.data_ptr(), m_[i].data_ptr(), v_[i].data_ptr(), p.numel(), false});
    }
    for (auto& [t, calls] : calls_by_step) {
      // The bias corrections of step t, with this group's betas.
      OptimizerArgs args;
      args.adam = {o.lr,
                   o.beta1,
                   o.beta2,
                   o.eps,
                   o.weight_decay,
                   1.0 - std::pow(o.beta1, static_cast<double>(t)),
                   1.0 - std::pow(o.beta2, static_cast<double>(t))};
      run_calls(calls, args);
    }
  }
}

}  // namespace anvil::optim
