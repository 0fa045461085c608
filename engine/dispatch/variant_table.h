// SPDX-License-Identifier: Apache-2.0
#pragma once
// VariantTable<Problem, Args>: one op's ordered list of named kernel variants.
//
// A Problem describes one call's shape and settings: it has `DeviceType device_type() const`,
// `std::string key() const` (the autotune cache key) and `std::string repr() const` (a one-line
// repro). Args is what a variant's function receives: the problem plus the data pointers.
// Selection follows Note [Variant selection] (selection.h). Tables are filled by
// register_builtin_kernels() (kernels/register.h), never by static initialisers.
#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/core/device.h"
#include "engine/core/error.h"
#include "engine/dispatch/selection.h"

namespace anvil {

// What the listing functions need from any table, whatever its types.
class VariantTableBase {
 public:
  struct Info {
    std::string name;
    DeviceType device;
    int priority;
    std::string description;
  };
  virtual ~VariantTableBase() = default;
  virtual const std::string& op() const = 0;
  virtual std::vector<Info> list() const = 0;
  virtual void clear_autotune_cache() = 0;
};

// Global index of tables by op name, for `anvil info`, benchmarks and error messages.
void register_variant_table(VariantTableBase* table);
std::vector<VariantTableBase*> variant_tables();
VariantTableBase* find_variant_table(const std::string& op);

inline constexpr int kRefPriority = -1000000;  // `ref` sorts after everything

template <typename Problem, typename Args>
class VariantTable final : public VariantTableBase {
 public:
  using Fn = std::function<void(const Args&)>;
  using SupportFn = std::function<Support(const Problem&)>;
  struct Variant {
    std::string name;
    DeviceType device = DeviceType::cpu;
    int priority = 0;    // higher is tried first
    SupportFn supports;  // null = supports everything on its device
    Fn fn;
    std::string description;  // one line for listings
    // Runs only when forced by name, never by default, heuristic or autotune: for variants that
    // change the numerics (TF32 tensor-core math), which a user must ask for.
    bool opt_in = false;
  };
  // Returns the name of the preferred variant for a problem, or "" for no preference.
  using Heuristic = std::function<std::string(const Problem&)>;

  explicit VariantTable(std::string op) : op_(std::move(op)) { register_variant_table(this); }

  const std::string& op() const override { return op_; }

  // Adds a variant; names are unique; the table stays sorted by priority with `ref` last.
  void add(Variant v) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& e : variants_)
      ANVIL_CHECK(e.name != v.name, op_.c_str(), "variant '", v.name, "' registered twice");
    if (v.name == "ref") v.priority = kRefPriority;
    variants_.push_back(std::move(v));
    std::stable_sort(variants_.begin(), variants_.end(),
                     [](const Variant& a, const Variant& b) { return a.priority > b.priority; });
  }
  void set_heuristic(Heuristic h) { heuristic_ = std::move(h); }

  const std::vector<Variant>& variants() const { return variants_; }
  const Variant* find(const std::string& name) const {
    for (const auto& v : variants_)
      if (v.name == name) return &v;
    return nullptr;
  }

  std::vector<Info> list() const override {
    std::vector<Info> out;
    for (const auto& v : variants_) out.push_back({v.name, v.device, v.priority, v.description});
    return out;
  }

  // Every variant with its answer for `p` (device mismatch is a reason too).
  std::vector<Candidate> candidates(const Problem& p) const {
    std::vector<Candidate> out;
    for (const auto& v : variants_) {
      Support s;
      if (v.device != p.device_type())
        s = Support::no(std::string("runs on ") + (v.device == DeviceType::cpu ? "cpu" : "cuda"));
      else if (v.supports)
        s = v.supports(p);
      out.push_back({v.name, s});
    }
    return out;
  }

  // The variant that runs `p` (Note [Variant selection]). With autotune on and no winner cached
  // for p.key(), `time_variant(v)` is called for every supporting variant (it must run v on
  // scratch outputs and return seconds) and the fastest is cached.
  const Variant& select(const Problem& p,
                        const std::function<double(const Variant&)>& time_variant = nullptr) {
    auto cands = candidates(p);
    SelectionPolicy policy;
    policy.forced = forced_variant(op_);
    for (std::size_t i = 0; i < cands.size(); ++i)
      if (variants_[i].opt_in && cands[i].support.ok && variants_[i].name != policy.forced)
        cands[i].support = Support::no("opt-in: runs only when forced by name");
    if (policy.forced.empty() && autotune_enabled() && time_variant)
      policy.tuned_winner = tuned_winner(p, cands, time_variant);
    if (heuristic_) policy.heuristic_pick = heuristic_(p);
    return variants_[select_variant(op_, p.repr(), cands, policy)];
  }

  // Runs `args` on the selected variant.
  void run(const Args& args, const std::function<double(const Variant&)>& time_variant = nullptr) {
    select(args.problem, time_variant).fn(args);
  }

  void clear_autotune_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    tuned_.clear();
  }

 private:
  std::string tuned_winner(const Problem& p, const std::vector<Candidate>& cands,
                           const std::function<double(const Variant&)>& time_variant) {
    const std::string key = p.key();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = tuned_.find(key); it != tuned_.end()) return it->second;
    }
    std::string best;
    double best_s = 0;
    for (std::size_t i = 0; i < variants_.size(); ++i) {
      if (!cands[i].support.ok || variants_[i].name == "ref") continue;
      time_variant(variants_[i]);  // warm-up (primitive creation, page faults)
      double s = time_variant(variants_[i]);
      s = std::min(s, time_variant(variants_[i]));
      if (best.empty() || s < best_s) {
        best = variants_[i].name;
        best_s = s;
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    tuned_[key] = best;
    return best;
  }

  std::string op_;
  std::vector<Variant> variants_;
  Heuristic heuristic_;
  std::map<std::string, std::string> tuned_;  // problem key -> winner (autotune cache)
  mutable std::mutex mu_;
};

// Wall-clock seconds of one call of fn (for autotune trials).
template <typename Fn>
double time_seconds(Fn&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace anvil
