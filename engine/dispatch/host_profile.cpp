// SPDX-License-Identifier: Apache-2.0
// Host time per dispatched variant (Note [Host profile] in host_profile.h).
#include "engine/dispatch/host_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <utility>

#include "engine/core/config.h"

namespace anvil {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Registry {
  std::mutex mu;
  std::deque<HostProfileSlot> slots;  // a deque: slots never move
  std::map<std::pair<std::string, std::string>, HostProfileSlot*> by_name;
};
Registry& registry() {
  static auto* r = new Registry();  // leaked: timed calls may run during static destruction
  return *r;
}

thread_local HostProfileScope* current_scope = nullptr;

}  // namespace

bool host_profile_enabled() {
  static const bool on = verbose_enabled("host_profile");
  return on;
}

HostProfileSlot* host_profile_slot(const std::string& op, const std::string& variant) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto [it, fresh] = r.by_name.try_emplace({op, variant}, nullptr);
  if (fresh) it->second = &r.slots.emplace_back();
  return it->second;
}

HostProfileScope::HostProfileScope(HostProfileSlot* slot)
    : slot_(slot), parent_(current_scope), start_ns_(now_ns()) {
  current_scope = this;
}

HostProfileScope::~HostProfileScope() {
  const std::int64_t took = now_ns() - start_ns_;
  current_scope = parent_;
  slot_->calls.fetch_add(1, std::memory_order_relaxed);
  slot_->inclusive_ns.fetch_add(took, std::memory_order_relaxed);
  slot_->exclusive_ns.fetch_add(took - child_ns_, std::memory_order_relaxed);
  if (parent_ != nullptr) parent_->child_ns_ += took;
}

std::vector<HostProfileRow> host_profile_rows() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<HostProfileRow> rows;
  for (const auto& [name, slot] : r.by_name) {
    const std::int64_t calls = slot->calls.load(std::memory_order_relaxed);
    if (calls == 0) continue;
    rows.push_back(
        {name.first, name.second, calls,
         1e-9 * static_cast<double>(slot->inclusive_ns.load(std::memory_order_relaxed)),
         1e-9 * static_cast<double>(slot->exclusive_ns.load(std::memory_order_relaxed))});
  }
  std::sort(rows.begin(), rows.end(), [](const HostProfileRow& a, const HostProfileRow& b) {
    return a.exclusive_s > b.exclusive_s;
  });
  return rows;
}

void host_profile_reset() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (HostProfileSlot& s : r.slots) {
    s.calls.store(0, std::memory_order_relaxed);
    s.inclusive_ns.store(0, std::memory_order_relaxed);
    s.exclusive_ns.store(0, std::memory_order_relaxed);
  }
}

std::string host_profile_table(const std::vector<HostProfileRow>& rows, double per) {
  const double d = per > 0 ? per : 1.0;
  std::string out =
      "  op                   variant                         calls   excl ms   incl ms  excl "
      "us/call\n";
  double total_ms = 0;
  char line[256];
  for (const HostProfileRow& r : rows) {
    const double calls = static_cast<double>(r.calls) / d;
    const double excl_ms = 1e3 * r.exclusive_s / d;
    total_ms += excl_ms;
    std::snprintf(line, sizeof line, "  %-20s %-30s %7.1f %9.3f %9.3f %13.2f\n", r.op.c_str(),
                  r.variant.c_str(), calls, excl_ms, 1e3 * r.inclusive_s / d,
                  1e6 * r.exclusive_s / static_cast<double>(r.calls));
    out += line;
  }
  std::snprintf(line, sizeof line, "  total exclusive host time in variants: %.3f ms\n", total_ms);
  out += line;
  return out;
}

}  // namespace anvil
