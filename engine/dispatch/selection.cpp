// SPDX-License-Identifier: Apache-2.0
// Variant selection, forcing and the autotune switch (engine/dispatch/selection.h).
#include "engine/dispatch/selection.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>

#include "engine/core/config.h"
#include "engine/core/error.h"
#include "engine/dispatch/variant_table.h"

namespace anvil {

std::size_t select_variant(const std::string& op, const std::string& problem,
                           const std::vector<Candidate>& candidates,
                           const SelectionPolicy& policy) {
  auto index_of = [&](const std::string& name) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < candidates.size(); ++i)
      if (candidates[i].name == name) return i;
    return std::nullopt;
  };
  auto all_names = [&] {
    std::string s;
    for (const auto& c : candidates) s += (s.empty() ? "" : ", ") + c.name;
    return s;
  };
  if (!policy.forced.empty()) {
    const auto i = index_of(policy.forced);
    ANVIL_CHECK(i.has_value(), op.c_str(), "forced variant '", policy.forced,
                "' does not exist; variants are: ", all_names());
    ANVIL_CHECK(candidates[*i].support.ok, op.c_str(), "forced variant '", policy.forced,
                "' does not support ", problem, ": ", candidates[*i].support.reason);
    return *i;
  }
  for (const std::string* pick : {&policy.tuned_winner, &policy.heuristic_pick}) {
    if (pick->empty()) continue;
    const auto i = index_of(*pick);
    if (i && candidates[*i].support.ok) return *i;
  }
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].support.ok) return i;
  std::string reasons;
  for (const auto& c : candidates) reasons += "\n  " + c.name + ": " + c.support.reason;
  fail(op.c_str(), "no variant supports ", problem, ":",
       reasons.empty() ? " (no variants registered)" : reasons);
}

// ---- forcing ----------------------------------------------------------------------------------
namespace {
std::mutex& global_mutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, std::string>& global_forced() {  // guarded by global_mutex()
  static std::map<std::string, std::string> m;
  return m;
}
// global_forced().size(), readable without the lock: selection skips the lock when nothing is
// forced process-wide (the common case, and it runs on every op call).
std::atomic<std::size_t> global_forced_count{0};
const std::map<std::string, std::string>& env_forced() {
  static const std::map<std::string, std::string> m =
      parse_variant_spec(env_or_empty("ANVIL_VARIANT"));
  return m;
}
thread_local std::map<std::string, std::string> tls_forced;  // ForceVariant guards
}  // namespace

std::map<std::string, std::string> parse_variant_spec(const std::string& spec) {
  std::map<std::string, std::string> out;
  std::size_t pos = 0;
  while (pos < spec.size()) {
    std::size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    ANVIL_CHECK_CONFIG(eq != std::string::npos && eq > 0 && eq + 1 < item.size(),
                       "parse_variant_spec", "expected op=name in '", spec, "', got '", item, "'");
    out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

std::string forced_variant(const std::string& op) {
  if (auto it = tls_forced.find(op); it != tls_forced.end()) return it->second;
  if (global_forced_count.load(std::memory_order_acquire) != 0) {
    std::lock_guard<std::mutex> lock(global_mutex());
    if (auto it = global_forced().find(op); it != global_forced().end()) return it->second;
  }
  if (auto it = env_forced().find(op); it != env_forced().end()) return it->second;
  return {};
}

void check_forced_variant_ops() {
  std::set<std::string> ops;
  for (const auto* table : variant_tables()) ops.insert(table->op());
  auto check = [&](const std::string& source, const std::map<std::string, std::string>& forced) {
    for (const auto& [op, name] : forced) {
      if (ops.count(op) != 0) continue;
      std::string known;
      for (const auto& o : ops) known += (known.empty() ? "" : ", ") + o;
      fail_config(source.c_str(), "forces variant '", name, "' for op '", op,
                  "', which anvil does not have; ops are: ", known);
    }
  };
  std::map<std::string, std::string> env;
  try {
    env = env_forced();
  } catch (const Error& e) {  // a malformed spec, from parse_variant_spec
    fail_config("ANVIL_VARIANT", e.what());
  }
  check("ANVIL_VARIANT", env);
  std::map<std::string, std::string> global;
  {
    std::lock_guard<std::mutex> lock(global_mutex());
    global = global_forced();
  }
  check("--variant (set_forced_variant)", global);
}

void set_forced_variant(const std::string& op, const std::string& name) {
  std::lock_guard<std::mutex> lock(global_mutex());
  if (name.empty())
    global_forced().erase(op);
  else
    global_forced()[op] = name;
  global_forced_count.store(global_forced().size(), std::memory_order_release);
}

ForceVariant::ForceVariant(std::string op, std::string name) : op_(std::move(op)) {
  if (auto it = tls_forced.find(op_); it != tls_forced.end()) previous_ = it->second;
  tls_forced[op_] = std::move(name);
}
ForceVariant::~ForceVariant() {
  if (previous_)
    tls_forced[op_] = *previous_;
  else
    tls_forced.erase(op_);
}

// ---- the dispatch log ---------------------------------------------------------------------------
int dispatch_verbosity() {
  static const int level =
      verbose_enabled("dispatch_all") ? 2 : (verbose_enabled("dispatch") ? 1 : 0);
  return level;
}

namespace {
// The rule of select_variant() that chose `name` under `policy` (Note [Variant selection]).
std::string rule_of(const std::string& name, const SelectionPolicy& policy) {
  if (!policy.forced.empty()) return "forced";
  if (policy.tuned_winner == name) return "autotune";
  if (policy.heuristic_pick == name) return "heuristic";
  return "order";
}
}  // namespace

std::string describe_selection(const std::string& op, const std::string& problem,
                               const std::vector<Candidate>& candidates, std::size_t chosen,
                               const SelectionPolicy& policy) {
  const std::string& name = candidates.at(chosen).name;
  const std::string by = rule_of(name, policy);
  // Why a variant that supports the problem was passed over.
  const std::string passed_over = by == "forced"     ? "supported, but " + name + " is forced"
                                  : by == "autotune" ? "supported, but autotune picked " + name
                                  : by == "heuristic"
                                      ? "supported, but the heuristic picks " + name
                                      : "supported, but " + name + " comes first in the order";
  std::string declined;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (i == chosen) continue;
    const Support& s = candidates[i].support;
    declined += (declined.empty() ? "" : "; ") + candidates[i].name + " (" +
                (s.ok ? passed_over : s.reason) + ")";
  }
  return "anvil dispatch: op=" + op + " problem=" + problem + " chosen=" + name + " by=" + by +
         " declined: " + (declined.empty() ? "none" : declined) +
         (policy.autotune_note.empty() ? "" : " autotune: " + policy.autotune_note);
}

void report_selection(const std::string& op, const std::string& key, const std::string& problem,
                      const std::vector<Candidate>& candidates, std::size_t chosen,
                      const SelectionPolicy& policy) {
  static std::mutex mu;
  static std::set<std::string> seen;  // op, problem key, variant and rule of each line printed
  if (dispatch_verbosity() == 1) {
    const std::string decision = op + '\n' + key + '\n' + candidates.at(chosen).name + '\n' +
                                 rule_of(candidates[chosen].name, policy);
    std::lock_guard<std::mutex> lock(mu);
    if (!seen.insert(decision).second) return;
  }
  const std::string line = describe_selection(op, problem, candidates, chosen, policy) + "\n";
  std::fputs(line.c_str(), stderr);  // one call: lines of concurrent selections do not mix
}

// ---- autotune ----------------------------------------------------------------------------------
namespace {
// Atomic: set_autotune() may run while other threads select.
std::atomic<bool>& autotune_flag() {
  static std::atomic<bool> on = [] {
    const std::string v = env_or_empty("ANVIL_AUTOTUNE");
    return !v.empty() && v != "0";
  }();
  return on;
}
}  // namespace
bool autotune_enabled() { return autotune_flag().load(std::memory_order_relaxed); }

namespace {
std::atomic<std::uint64_t> memo_hits{0};
std::atomic<bool> memo_check{false};
}  // namespace
std::uint64_t selection_memo_hits() { return memo_hits.load(std::memory_order_relaxed); }
void count_selection_memo_hit() { memo_hits.fetch_add(1, std::memory_order_relaxed); }
void set_selection_memo_check(bool on) { memo_check.store(on, std::memory_order_relaxed); }
bool selection_memo_check() { return memo_check.load(std::memory_order_relaxed); }

unsigned selection_context(bool autotunes) { return openmp_context() * 2U + (autotunes ? 1U : 0U); }
void set_autotune(bool on) { autotune_flag().store(on, std::memory_order_relaxed); }

}  // namespace anvil
