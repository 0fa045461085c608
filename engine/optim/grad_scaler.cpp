// SPDX-License-Identifier: Apache-2.0
// The loss scaler of float16 training (engine/optim/grad_scaler.h, Note [Dynamic loss scaling]):
// the scale and its growth/back-off on the host, unscaling and the overflow check on the
// gradients' device through optim::unscale_grads_.
#include "engine/optim/grad_scaler.h"

#include <cmath>
#include <limits>

#include "engine/autograd/functions.h"
#include "engine/optim/optimizer_state.h"

namespace anvil::optim {
namespace {

void check_options(const GradScalerOptions& o, const char* where) {
  ANVIL_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0, where,
              "init_scale must be a positive finite number, got ", o.init_scale);
  ANVIL_CHECK(std::isfinite(o.growth_factor) && o.growth_factor > 1, where,
              "growth_factor must be a finite number > 1, got ", o.growth_factor);
  ANVIL_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1, where,
              "backoff_factor must be in (0, 1), got ", o.backoff_factor);
  ANVIL_CHECK(o.growth_interval >= 1, where, "growth_interval must be >= 1, got ",
              o.growth_interval);
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : opt_(options), scale_(options.init_scale) {
  check_options(opt_, "GradScaler");
}

Tensor GradScaler::scale(const Tensor& loss) const { return loss * scale_; }

void GradScaler::unscale_(Optimizer& opt) {
  ANVIL_CHECK(stage_ == Stage::ready, "GradScaler::unscale_",
              stage_ == Stage::unscaled ? "already called since the last update()"
                                        : "called after step(); call update() first");
  // Folded SGD (Note [Folded SGD]) updates the weights inside backward, from scaled gradients
  // and before any overflow check.
  const auto* sgd = dynamic_cast<const SGD*>(&opt);
  ANVIL_CHECK(sgd == nullptr || !sgd->folded(), "GradScaler::unscale_",
              "SGD folded into backward updates before the overflow check; turn folding off");
  found_inf_ = unscale_grads_(opt.params(), 1.0 / scale_);
  stage_ = Stage::unscaled;
}

bool GradScaler::step(Optimizer& opt) {
  ANVIL_CHECK(stage_ != Stage::stepped, "GradScaler::step",
              "called twice without update() in between");
  if (stage_ == Stage::ready) unscale_(opt);
  // The host wait of the step: one flag per device the gradients live on.
  bool found = false;
  for (const Tensor& flag : found_inf_) found = found || flag.item() != 0.0;
  found_inf_.clear();
  last_skipped_ = found;
  stage_ = Stage::stepped;
  if (found) {
    ++skipped_steps_;
    return false;
  }
  opt.step();
  return true;
}

void GradScaler::update() {
  ANVIL_CHECK(stage_ == Stage::stepped, "GradScaler::update",
              "no step() since the last update() (the overflow check has not run)");
  stage_ = Stage::ready;
  if (last_skipped_) {
    scale_ *= opt_.backoff_factor;
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ < opt_.growth_interval) return;
  growth_tracker_ = 0;
  const double grown = scale_ * opt_.growth_factor;
  if (grown <= static_cast<double>(std::numeric_limits<float>::max())) scale_ = grown;
}

std::map<std::string, std::string> GradScaler::state_metadata() const {
  return {{"scale", detail::text_of(scale_)},
          {"growth_factor", detail::text_of(opt_.growth_factor)},
          {"backoff_factor", detail::text_of(opt_.backoff_factor)},
          {"growth_interval", std::to_string(opt_.growth_interval)},
          {"growth_tracker", std::to_string(growth_tracker_)},
          {"skipped_steps", std::to_string(skipped_steps_)}};
}

void GradScaler::load_state(const std::map<std::string, std::string>& metadata) {
  const char* where = "GradScaler::load_state";
  // init_scale only says where the scale started; the saved scale replaces it as the state.
  GradScalerOptions o = opt_;
  o.growth_factor = detail::read_number<double>(metadata, "growth_factor", where);
  o.backoff_factor = detail::read_number<double>(metadata, "backoff_factor", where);
  o.growth_interval = detail::read_number<std::int64_t>(metadata, "growth_interval", where);
  check_options(o, where);
  const auto scale = detail::read_number<double>(metadata, "scale", where);
  ANVIL_CHECK(std::isfinite(scale) && scale > 0, where,
              "scale must be a positive finite number, got ", scale);
  const auto tracker = detail::read_number<std::int64_t>(metadata, "growth_tracker", where);
  ANVIL_CHECK(tracker >= 0 && tracker < o.growth_interval, where, "growth_tracker must be in [0, ",
              o.growth_interval, "), got ", tracker);
  const auto skipped = detail::read_number<std::int64_t>(metadata, "skipped_steps", where);
  ANVIL_CHECK(skipped >= 0, where, "skipped_steps must be >= 0, got ", skipped);
  opt_ = o;
  scale_ = scale;
  growth_tracker_ = tracker;
  skipped_steps_ = skipped;
  last_skipped_ = false;
  stage_ = Stage::ready;
  found_inf_.clear();
}

}  // namespace anvil::optim
