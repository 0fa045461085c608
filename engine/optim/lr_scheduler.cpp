// SPDX-License-Identifier: Apache-2.0
// Learning-rate schedulers (engine/optim/lr_scheduler.h).
#include "engine/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include "engine/core/parse_number.h"
#include "engine/optim/optimizer_state.h"

namespace anvil::optim {

using detail::entry;
using detail::read_number;
using detail::text_of;
using Metadata = std::map<std::string, std::string>;

// Note [Scheduler closed forms]
// PyTorch's schedulers update the lr recursively in step() (StepLR multiplies by gamma at each
// boundary, CosineAnnealingLR applies a ratio of consecutive cosines) and document the closed
// forms those recursions follow. Here every step sets lr_at(t, base), the closed form: the same
// values up to the last bits of rounding, no drift over long runs, and a state that is just the
// step count and the base lrs, so a resumed schedule continues bit-exactly.
LRScheduler::LRScheduler(Optimizer& opt) : opt_(&opt) {
  for (std::size_t g = 0; g < opt.num_groups(); ++g) base_lrs_.push_back(opt.group_lr(g));
}

void LRScheduler::start() { apply_lrs(); }

void LRScheduler::apply_lrs() {
  last_lr_.resize(base_lrs_.size());
  for (std::size_t g = 0; g < base_lrs_.size(); ++g) {
    last_lr_[g] = lr_at(step_, base_lrs_[g]);
    opt_->set_group_lr(g, last_lr_[g]);
  }
}

void LRScheduler::step() {
  // A group added to the optimizer after this scheduler was built has no base lr here.
  ANVIL_CHECK(opt_->num_groups() == base_lrs_.size(), (type_name() + "::step").c_str(),
              "built for ", base_lrs_.size(), " parameter groups, the optimizer now has ",
              opt_->num_groups(), " (build the scheduler again after add_param_group)");
  ++step_;
  apply_lrs();
}

Metadata LRScheduler::state_metadata() const {
  Metadata md = options_metadata();
  md["type"] = type_name();
  md["step"] = std::to_string(step_);
  md["num_groups"] = std::to_string(base_lrs_.size());
  for (std::size_t g = 0; g < base_lrs_.size(); ++g)
    md["base_lr." + std::to_string(g)] = text_of(base_lrs_[g]);
  return md;
}

LRScheduler::Loaded LRScheduler::check_state(const Metadata& metadata) const {
  const std::string where_s = type_name() + "::load_state";
  const char* where = where_s.c_str();
  const std::string& type = entry(metadata, "type", where);
  ANVIL_CHECK(type == type_name(), where, "the state was saved by ", type, ", this scheduler is ",
              type_name());
  const auto groups = read_number<std::int64_t>(metadata, "num_groups", where);
  ANVIL_CHECK(groups == static_cast<std::int64_t>(base_lrs_.size()), where, "the state is for ",
              groups, " parameter groups, this scheduler's optimizer has ", base_lrs_.size());
  Loaded s;
  s.step = read_number<std::int64_t>(metadata, "step", where);
  ANVIL_CHECK(s.step >= 0, where, "step must be >= 0, got ", s.step);
  for (std::size_t g = 0; g < base_lrs_.size(); ++g) {
    const std::string key = "base_lr." + std::to_string(g);
    const auto lr = read_number<double>(metadata, key, where);
    ANVIL_CHECK(lr >= 0 && std::isfinite(lr), where, key, " must be finite and >= 0, got ", lr);
    s.base_lrs.push_back(lr);
  }
  try {
    check_options(metadata);
  } catch (const Error& e) {
    fail(where, e.what());
  }
  s.options = metadata;
  return s;
}

void LRScheduler::commit(const Loaded& state) {
  apply_options(state.options);
  step_ = state.step;
  base_lrs_ = state.base_lrs;
  apply_lrs();
}

void LRScheduler::load_state(const Metadata& metadata) { commit(check_state(metadata)); }

namespace {

void check_positive_count(std::int64_t n, const char* where, const char* what) {
  ANVIL_CHECK(n >= 1, where, what, " must be >= 1, got ", n);
}

void check_step_lr(std::int64_t step_size, double gamma) {
  check_positive_count(step_size, "StepLR", "step_size");
  ANVIL_CHECK(gamma > 0 && std::isfinite(gamma), "StepLR",
              "gamma must be positive and finite, got ", gamma);
}

// At most this many milestones: a schedule, not a table of every step.
constexpr std::size_t kMaxMilestones = 1024;

void check_multistep(const std::vector<std::int64_t>& milestones, double gamma) {
  ANVIL_CHECK(!milestones.empty() && milestones.size() <= kMaxMilestones, "MultiStepLR",
              "needs 1 to ", kMaxMilestones, " milestones, got ", milestones.size());
  for (const std::int64_t m : milestones) check_positive_count(m, "MultiStepLR", "a milestone");
  ANVIL_CHECK(gamma > 0 && std::isfinite(gamma), "MultiStepLR",
              "gamma must be positive and finite, got ", gamma);
}

// "10,20,20" <-> {10, 20, 20}, for the checkpoint metadata.
std::string milestones_text(const std::vector<std::int64_t>& milestones) {
  std::string out;
  for (const std::int64_t m : milestones) {
    if (!out.empty()) out += ',';
    out += std::to_string(m);
  }
  return out;
}
std::vector<std::int64_t> read_milestones(const Metadata& md) {
  const std::string& text = entry(md, "milestones", "MultiStepLR");
  std::vector<std::int64_t> out;
  std::size_t begin = 0;
  while (begin <= text.size() && out.size() <= kMaxMilestones) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const auto m = parse_number<std::int64_t>(text.substr(begin, end - begin));
    ANVIL_CHECK(m.has_value(), "MultiStepLR", "milestones must be a comma list of steps, got '",
                text.substr(0, 64), "'");
    out.push_back(*m);
    begin = end + 1;
  }
  return out;
}

void check_cosine(std::int64_t t_max, double eta_min) {
  check_positive_count(t_max, "CosineAnnealingLR", "t_max");
  ANVIL_CHECK(eta_min >= 0 && std::isfinite(eta_min), "CosineAnnealingLR",
              "eta_min must be finite and >= 0, got ", eta_min);
}

void check_warmup(std::int64_t steps, double start_factor) {
  check_positive_count(steps, "LinearWarmup", "warmup_steps");
  ANVIL_CHECK(start_factor > 0 && start_factor <= 1, "LinearWarmup",
              "start_factor must be in (0, 1], got ", start_factor);
}

}  // namespace

// ---- StepLR -----------------------------------------------------------------------------------

StepLR::StepLR(Optimizer& opt, std::int64_t step_size, double gamma)
    : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
  check_step_lr(step_size_, gamma_);
  start();
}

double StepLR::lr_at(std::int64_t t, double base) const {
  const std::int64_t decays = t / step_size_;  // floor: t >= 0 (StepLR's whole periods)
  return base * std::pow(gamma_, static_cast<double>(decays));
}

Metadata StepLR::options_metadata() const {
  return {{"step_size", std::to_string(step_size_)}, {"gamma", text_of(gamma_)}};
}

void StepLR::check_options(const Metadata& md) const {
  check_step_lr(read_number<std::int64_t>(md, "step_size", "StepLR"),
                read_number<double>(md, "gamma", "StepLR"));
}

void StepLR::apply_options(const Metadata& md) {
  step_size_ = read_number<std::int64_t>(md, "step_size", "StepLR");
  gamma_ = read_number<double>(md, "gamma", "StepLR");
}

// ---- MultiStepLR ------------------------------------------------------------------------------

MultiStepLR::MultiStepLR(Optimizer& opt, std::vector<std::int64_t> milestones, double gamma)
    : LRScheduler(opt), milestones_(std::move(milestones)), gamma_(gamma) {
  check_multistep(milestones_, gamma_);
  std::sort(milestones_.begin(), milestones_.end());
  start();
}

double MultiStepLR::lr_at(std::int64_t t, double base) const {
  // The milestones reached by step t (PyTorch's bisect_right over the sorted milestones).
  const auto reached =
      std::upper_bound(milestones_.begin(), milestones_.end(), t) - milestones_.begin();
  return base * std::pow(gamma_, static_cast<double>(reached));
}

Metadata MultiStepLR::options_metadata() const {
  return {{"milestones", milestones_text(milestones_)}, {"gamma", text_of(gamma_)}};
}

void MultiStepLR::check_options(const Metadata& md) const {
  std::vector<std::int64_t> m = read_milestones(md);
  check_multistep(m, read_number<double>(md, "gamma", "MultiStepLR"));
  ANVIL_CHECK(std::is_sorted(m.begin(), m.end()), "MultiStepLR",
              "saved milestones must be sorted, got '", milestones_text(m).substr(0, 64), "'");
}

void MultiStepLR::apply_options(const Metadata& md) {
  milestones_ = read_milestones(md);
  gamma_ = read_number<double>(md, "gamma", "MultiStepLR");
}

// ---- CosineAnnealingLR ------------------------------------------------------------------------

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, std::int64_t t_max, double eta_min)
    : LRScheduler(opt), t_max_(t_max), eta_min_(eta_min) {
  check_cosine(t_max_, eta_min_);
  start();
}

double CosineAnnealingLR::lr_at(std::int64_t t, double base) const {
  const double angle = std::numbers::pi * static_cast<double>(t) / static_cast<double>(t_max_);
  return eta_min_ + (base - eta_min_) * (1.0 + std::cos(angle)) / 2.0;
}

Metadata CosineAnnealingLR::options_metadata() const {
  return {{"t_max", std::to_string(t_max_)}, {"eta_min", text_of(eta_min_)}};
}

void CosineAnnealingLR::check_options(const Metadata& md) const {
  check_cosine(read_number<std::int64_t>(md, "t_max", "CosineAnnealingLR"),
               read_number<double>(md, "eta_min", "CosineAnnealingLR"));
}

void CosineAnnealingLR::apply_options(const Metadata& md) {
  t_max_ = read_number<std::int64_t>(md, "t_max", "CosineAnnealingLR");
  eta_min_ = read_number<double>(md, "eta_min", "CosineAnnealingLR");
}

// ---- LinearWarmup -----------------------------------------------------------------------------

LinearWarmup::LinearWarmup(Optimizer& opt, std::int64_t warmup_steps, double start_factor,
                           std::unique_ptr<LRScheduler> after)
    : LRScheduler(opt),
      warmup_steps_(warmup_steps),
      start_factor_(start_factor),
      after_(std::move(after)) {
  check_warmup(warmup_steps_, start_factor_);
  ANVIL_CHECK(!after_ || &after_->optimizer() == &opt, "LinearWarmup",
              "the schedule after the warm-up (", after_ ? after_->type_name() : "",
              ") was built on another optimizer");
  start();
}

double LinearWarmup::factor(std::int64_t t) const {
  const double done = static_cast<double>(std::min(t, warmup_steps_));
  return start_factor_ + (1.0 - start_factor_) * done / static_cast<double>(warmup_steps_);
}

double LinearWarmup::lr_at(std::int64_t t, double base) const {
  return factor(t) * (after_ ? after_->lr_at(t, base) : base);
}

// The schedule after the warm-up is part of the options: "after" = its type (or "none") and its
// options under "after.".
Metadata LinearWarmup::options_metadata() const {
  Metadata md = {{"warmup_steps", std::to_string(warmup_steps_)},
                 {"start_factor", text_of(start_factor_)},
                 {"after", after_ ? after_->type_name() : "none"}};
  if (after_)
    for (const auto& [k, v] : after_->options_metadata()) md["after." + k] = v;
  return md;
}

void LinearWarmup::check_options(const Metadata& md) const {
  const char* where = "LinearWarmup";
  check_warmup(read_number<std::int64_t>(md, "warmup_steps", where),
               read_number<double>(md, "start_factor", where));
  const std::string& after = entry(md, "after", where);
  const std::string mine = after_ ? after_->type_name() : "none";
  ANVIL_CHECK(after == mine, where, "the state warms up into ", after, ", this scheduler into ",
              mine);
  if (after_) after_->check_options(detail::with_prefix_removed(md, "after."));
}

void LinearWarmup::apply_options(const Metadata& md) {
  warmup_steps_ = read_number<std::int64_t>(md, "warmup_steps", "LinearWarmup");
  start_factor_ = read_number<double>(md, "start_factor", "LinearWarmup");
  if (after_) after_->apply_options(detail::with_prefix_removed(md, "after."));
}

}  // namespace anvil::optim
