// SPDX-License-Identifier: Apache-2.0
// nn::Module bookkeeping (engine/nn/module.h).
#include "engine/nn/module.h"

#include "engine/core/views.h"

namespace anvil::nn {

Tensor& Module::parameter(const std::string& name) {
  for (auto& [n, t] : params_)
    if (n == name) return t;
  fail("Module::parameter", type_name(), " has no parameter '", name, "'");
}

void Module::register_parameter(std::string name, Tensor value) {
  check_defined(value, "Module::register_parameter", name.c_str());
  for (const auto& [n, t] : params_)
    ANVIL_CHECK(n != name, "Module::register_parameter", "parameter '", name, "' registered twice");
  value.set_requires_grad(true);
  params_.emplace_back(std::move(name), std::move(value));
}

Tensor& Module::buffer(const std::string& name) {
  for (auto& [n, t] : buffers_)
    if (n == name) return t;
  fail("Module::buffer", type_name(), " has no buffer '", name, "'");
}

void Module::register_buffer(std::string name, Tensor value) {
  check_defined(value, "Module::register_buffer", name.c_str());
  for (const auto& [n, t] : buffers_)
    ANVIL_CHECK(n != name, "Module::register_buffer", "buffer '", name, "' registered twice");
  buffers_.emplace_back(std::move(name), std::move(value));
}

void Module::collect_buffers(const std::string& prefix,
                             std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [n, t] : buffers_) out.emplace_back(prefix + n, t);
  for (const auto& [n, m] : children_) m->collect_buffers(prefix + n + ".", out);
}

std::vector<std::pair<std::string, std::string>> Module::named_extra_state() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [k, v] : extra_state()) out.emplace_back(k, v);
  for (const auto& [n, m] : children_)
    for (auto& [k, v] : m->named_extra_state())
      out.emplace_back(std::string(n).append(".").append(k), v);
  return out;
}

namespace {
// The entries of `state` under "<child>.", without the prefix.
std::map<std::string, std::string> child_state(const std::map<std::string, std::string>& state,
                                               const std::string& child) {
  std::map<std::string, std::string> sub;
  const std::string prefix = child + ".";
  for (auto it = state.lower_bound(prefix); it != state.end() && it->first.rfind(prefix, 0) == 0;
       ++it)
    sub.emplace(it->first.substr(prefix.size()), it->second);
  return sub;
}
}  // namespace

void Module::check_extra_state(const std::map<std::string, std::string>& state) const {
  for (const auto& [key, value] : named_extra_state()) {
    (void)value;
    ANVIL_CHECK(state.count(key) != 0, "Module::load_extra_state", "no entry for ", key);
  }
  check_extra_state_values(state, "");
}

void Module::check_extra_state_values(const std::map<std::string, std::string>& state,
                                      const std::string& prefix) const {
  for (const auto& [k, v] : extra_state()) {
    (void)v;
    try {
      validate_extra_state(k, state.at(k));
    } catch (const Error& e) {
      fail("Module::load_extra_state", "entry ", prefix, k, ": ", e.what());
    }
  }
  for (const auto& [n, m] : children_)
    m->check_extra_state_values(child_state(state, n), prefix + n + ".");
}

void Module::load_extra_state(const std::map<std::string, std::string>& state) {
  check_extra_state(state);
  // Validated: nothing below can fail, so a failure above changed nothing.
  for (const auto& [k, v] : extra_state()) {
    (void)v;
    set_extra_state(k, state.at(k));
  }
  for (const auto& [n, m] : children_) m->load_extra_state(child_state(state, n));
}

void Module::validate_extra_state(const std::string& key, const std::string& value) const {
  (void)value;
  fail("Module::set_extra_state", type_name(), " has no extra state '", key, "'");
}

void Module::set_extra_state(const std::string& key, const std::string& value) {
  (void)value;
  fail("Module::set_extra_state", type_name(), " has no extra state '", key, "'");
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect_buffers("", out);
  return out;
}

void Module::collect(const std::string& prefix,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [n, t] : params_) out.emplace_back(prefix + n, t);
  for (const auto& [n, m] : children_) m->collect(prefix + n + ".", out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

std::int64_t Module::num_parameters() const {
  std::int64_t n = 0;
  for (const auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, m] : children_) m->train(on);
}

// Note [Sequence-model hooks] in module.h.
Tensor Module::forward_inputs(const std::vector<Tensor>& inputs) {
  ANVIL_CHECK(inputs.size() == 1, (type_name() + "::forward_inputs").c_str(), "takes 1 input, got ",
              inputs.size());
  return forward(inputs.front());
}

void Module::reset_state() {
  for (auto& [n, m] : children_) m->reset_state();
}

Tensor Module::sequence_loss(const Tensor& ids, const Tensor& targets) {
  (void)ids;
  (void)targets;
  fail("Module::sequence_loss", type_name(),
       " has no sequence loss (has_sequence_loss() is false); use its forward and a loss");
}

void Module::zero_grad() {
  for (auto& t : parameters()) t.mutable_grad() = Tensor();
}

void Module::to(Device device) {
  for (auto& [n, t] : params_) {
    if (t.device() == device) continue;
    Tensor moved = raw::to_device(t, device);
    moved.set_requires_grad(true);
    t = moved;
  }
  for (auto& [n, t] : buffers_)
    if (t.device() != device) t = raw::to_device(t, device);
  for (auto& [n, m] : children_) m->to(device);
}

void Module::describe(std::string& out, const std::string& name, int depth) const {
  out += std::string(2 * depth, ' ') + (name.empty() ? "" : name + ": ") + type_name() + "(" +
         extra_repr() + ")\n";
  for (const auto& [n, m] : children_) m->describe(out, n, depth + 1);
}

std::string Module::str() const {
  std::string out;
  describe(out, "", 0);
  return out;
}

}  // namespace anvil::nn
