// SPDX-License-Identifier: Apache-2.0
#pragma once
// VariantTable<Problem, Args>: one op's ordered list of named kernel variants.
//
// A Problem describes one call's shape and settings: it has `DeviceType device_type() const`,
// equality and fields() (Note [Problem fields]: the memo and autotune keys), `std::string key()
// const` (the dispatch log's key) and `std::string repr() const` (a one-line repro). Args is what a
// variant's function receives: the problem plus the data pointers. Selection follows Note [Variant
// selection] (selection.h). Tables are filled by register_builtin_kernels() (kernels/register.h),
// never by static initialisers.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <iterator>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/device.h"
#include "engine/core/error.h"
#include "engine/dispatch/autotune_trials.h"
#include "engine/dispatch/host_profile.h"
#include "engine/dispatch/problem_fields.h"
#include "engine/dispatch/selection.h"

namespace anvil {

// Note [Variant tags]
// A variant's tags say what its numerics and resources are, beyond speed, as cudnn-frontend's
// numerical and behaviour notes do: `tf32` (multiplies in TF32 on tensor cores: 10-bit
// significands), `nondeterministic` (sums in an order that can change from run to run, through
// atomics: the last bits may differ), `workspace` (needs scratch memory beyond its outputs, per
// problem) and `opt_in` (runs only when forced by name). `anvil info` lists them, and
// anvil_bench's --anvil_skip_tag leaves the variants with a tag out of its families.
inline constexpr const char* kTagTf32 = "tf32";
inline constexpr const char* kTagNondeterministic = "nondeterministic";
inline constexpr const char* kTagWorkspace = "workspace";
inline constexpr const char* kTagOptIn = "opt_in";

// A variant's registered tags, with kTagOptIn when it is opt-in.
inline std::vector<std::string> tags_of(std::vector<std::string> tags, bool opt_in) {
  if (opt_in) tags.emplace_back(kTagOptIn);
  return tags;
}

// What the listing functions need from any table, whatever its types.
class VariantTableBase {
 public:
  struct Info {
    std::string name;
    DeviceType device;
    std::string description;
    std::vector<std::string> tags;  // Note [Variant tags]; "opt_in" included when it is one
  };
  virtual ~VariantTableBase() = default;
  virtual const std::string& op() const = 0;
  // The registered variants in the table's order (`ref` last).
  virtual std::vector<Info> list() const = 0;
  // The declared order (Note [Variant order]): every name the table may hold, registered or not.
  virtual std::vector<std::string> order() const = 0;
  virtual void clear_autotune_cache() = 0;
  // Why the op never autotunes ("" when it does): Note [Ops that do not autotune].
  virtual std::string no_autotune_reason() const = 0;
  // What autotune timed for each problem it has a winner for (Note [Autotune trials]).
  virtual std::vector<AutotuneRecord> autotune_records() const = 0;
};

// Global index of tables by op name, for `anvil info`, benchmarks and error messages. A table
// joins it when constructed and leaves it when destroyed.
void register_variant_table(VariantTableBase* table);
void unregister_variant_table(VariantTableBase* table);
std::vector<VariantTableBase*> variant_tables();
VariantTableBase* find_variant_table(const std::string& op);

// Note [Variant order]
// A table's order (selection step 4 of Note [Variant selection], and every listing) is one
// ordered list of names, declared once with set_order() before any variant is added; for the
// built-in tables every list is in one file, kernels/variant_order.cpp (CPU and CUDA names
// together, `ref` last). add(v) puts v at its name's place in that list and throws when the list
// does not name it, so the list and the registered variants cannot drift apart; a name the list
// holds but nobody registers (a CUDA variant in a process that never loads the CUDA library) is
// simply absent. A table whose order was never declared knows only `ref`.
// Variants added at run time that no list names (tests, benchmark stand-ins) are placed
// explicitly: add(VariantPlace::before("x"), v) inserts the name into the order, then adds v.
struct VariantPlace {
  enum class Kind { first, before, after, last };
  Kind kind = Kind::last;
  std::string anchor;  // for before / after: a name in the declared order
  static VariantPlace first() { return {Kind::first, {}}; }
  static VariantPlace before(std::string name) { return {Kind::before, std::move(name)}; }
  static VariantPlace after(std::string name) { return {Kind::after, std::move(name)}; }
  static VariantPlace last() { return {Kind::last, {}}; }  // last before `ref`
};

// Note [Variant snapshots]
// Variants are added while other threads select: the CUDA library registers its variants on the
// first GPU use (kernels/cuda/cuda_backend_impl.cpp), whichever thread that is, and tests add
// variants at run time. So readers never walk a container that a writer changes:
//   - every Variant lives in its own heap node, never moved or freed before the table, so the
//     `const Variant&` that select() returns stays valid whatever is added later;
//   - the ordered list of variants and the heuristic form an immutable Snapshot; add() and
//     set_heuristic() build a new one under mu_ and publish it with one release store;
//   - a reader (select, find, candidates, variants, list) takes the current snapshot with one
//     acquire load: no lock and no reference count on the per-op-call path;
//   - replaced snapshots are kept until the table dies, since a reader may still be walking one
//     (a table has a few dozen variants at most, so this is a few kilobytes).
// The autotune cache (tuned_) and the declared order (order_, read by writers and order()) are
// guarded by mu_; forcing is per thread or under its own lock (selection.cpp).
// Note [Selection memo]
// A training step dispatches hundreds of ops, most with a problem seen in the step before, so
// select() keeps each decision: (snapshot, selection_context(), forced name, problem) -> variant.
// That key holds everything a decision reads besides the problem itself: the variant list and
// heuristic (the snapshot), forcing, whether autotune may run, and the OpenMP thread count that
// heuristics read (selection_context(), selection.h). A hit costs a hash of the problem's fields
// (Note [Problem fields]) and a shared lock: no candidate list, no supports() calls, no strings.
// Not kept: decisions with the dispatch log on (each is logged in full), and failures (they
// throw again). clear_autotune_cache() empties the memo too; a full memo is emptied.
// test_selection_memo checks that select() equals select_uncached() on every model problem.
template <typename Problem, typename Args>
requires HashableProblem<Problem>
class VariantTable final : public VariantTableBase {
 public:
  using Fn = std::function<void(const Args&)>;
  using SupportFn = std::function<Support(const Problem&)>;
  struct Variant {
    std::string name;
    DeviceType device = DeviceType::cpu;  // CPU variants leave it unset
    SupportFn supports;                   // null = supports everything on its device
    Fn fn;
    std::string description;  // one line for listings
    // Runs only when forced by name, never by default, heuristic or autotune: for variants that
    // change the numerics (TF32 tensor-core math), which a user must ask for.
    bool opt_in = false;
    // What a user choosing a variant should know (Note [Variant tags]): kTagTf32,
    // kTagNondeterministic, kTagWorkspace ("opt_in" is added from the flag above).
    std::vector<std::string> tags;
  };
  // Returns the name of the preferred variant for a problem, or "" for no preference.
  using Heuristic = std::function<std::string(const Problem&)>;

  // The variants of one snapshot in the table's order (`ref` last): a cheap view that stays valid
  // as long as the table, whatever is added later (Note [Variant snapshots]).
  class VariantList {
   public:
    // The standard iterator interface spells these names in lower case.
    // NOLINTBEGIN(readability-identifier-naming)
    class iterator {
     public:
      using iterator_category = std::random_access_iterator_tag;
      using value_type = Variant;
      using difference_type = std::ptrdiff_t;
      using pointer = const Variant*;
      using reference = const Variant&;
      iterator() = default;
      explicit iterator(const Variant* const* p) : p_(p) {}
      reference operator*() const { return **p_; }
      pointer operator->() const { return *p_; }
      iterator& operator++() {
        ++p_;
        return *this;
      }
      iterator operator++(int) { return iterator(p_++); }
      difference_type operator-(const iterator& o) const { return p_ - o.p_; }
      bool operator==(const iterator& o) const { return p_ == o.p_; }
      bool operator!=(const iterator& o) const { return p_ != o.p_; }

     private:
      const Variant* const* p_ = nullptr;
    };
    // NOLINTEND(readability-identifier-naming)
    explicit VariantList(const std::vector<const Variant*>* v) : v_(v) {}
    iterator begin() const { return iterator(v_->data()); }
    iterator end() const { return iterator(v_->data() + v_->size()); }
    std::size_t size() const { return v_->size(); }
    bool empty() const { return v_->empty(); }
    const Variant& operator[](std::size_t i) const { return *(*v_)[i]; }
    const Variant& front() const { return *v_->front(); }
    const Variant& back() const { return *v_->back(); }

   private:
    const std::vector<const Variant*>* v_;
  };

  explicit VariantTable(std::string op) : VariantTable(std::move(op), std::string()) {}
  // A table whose op cannot autotune, with the reason (Note [Ops that do not autotune]).
  VariantTable(std::string op, const std::string& no_autotune_reason) : op_(std::move(op)) {
    auto first = std::make_unique<Snapshot>();
    first->no_autotune = no_autotune_reason;
    publish(std::move(first));
    register_variant_table(this);
  }
  ~VariantTable() override { unregister_variant_table(this); }
  VariantTable(const VariantTable&) = delete;
  VariantTable& operator=(const VariantTable&) = delete;

  const std::string& op() const override { return op_; }

  // Declares the order of the table's variants (Note [Variant order]): unique names, `ref` last.
  // Once, before any variant is added.
  void set_order(std::vector<std::string> names) {
    std::lock_guard<std::mutex> lock(mu_);
    ANVIL_CHECK(snapshot().variants.empty() && !order_declared_, op_.c_str(),
                "set_order: the order must be declared once, before any variant is added");
    ANVIL_CHECK(!names.empty() && names.back() == "ref", op_.c_str(),
                "set_order: the list must end with 'ref', got [", join(names), "]");
    for (std::size_t i = 0; i < names.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        ANVIL_CHECK(names[i] != names[j], op_.c_str(), "set_order: '", names[i],
                    "' listed twice in [", join(names), "]");
    order_ = std::move(names);
    order_declared_ = true;
  }
  std::vector<std::string> order() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }

  // Adds a variant at its name's place in the declared order (Note [Variant order]); names are
  // unique. Throws when the order does not name it.
  void add(Variant v) {
    std::lock_guard<std::mutex> lock(mu_);
    ANVIL_CHECK(position(v.name) < order_.size(), op_.c_str(), "variant '", v.name,
                "' is not in the table's declared order [", join(order_),
                "]: add it to kernels/variant_order.cpp, or place it with add(VariantPlace, v)");
    insert(std::move(v));
  }
  // Adds a variant that the declared order does not name, at an explicit place (tests and
  // benchmarks that add variants at run time): the name joins the order, then the variant.
  void add(const VariantPlace& place, Variant v) {
    std::lock_guard<std::mutex> lock(mu_);
    ANVIL_CHECK(position(v.name) == order_.size(), op_.c_str(), "variant '", v.name,
                "' is in the declared order already: add it without a place");
    std::size_t at = order_.size() - 1;  // last: just before `ref`
    if (place.kind == VariantPlace::Kind::first) at = 0;
    if (place.kind == VariantPlace::Kind::before || place.kind == VariantPlace::Kind::after) {
      at = position(place.anchor);
      ANVIL_CHECK(at < order_.size(), op_.c_str(), "cannot place '", v.name, "' next to '",
                  place.anchor, "', which is not in the declared order [", join(order_), "]");
      if (place.kind == VariantPlace::Kind::after) ++at;
      ANVIL_CHECK(at < order_.size(), op_.c_str(), "cannot place '", v.name,
                  "' after 'ref': `ref` is always last");
    }
    order_.insert(order_.begin() + static_cast<std::ptrdiff_t>(at), v.name);
    insert(std::move(v));
  }
  // Note [Ops that do not autotune]
  // Autotune runs every candidate on the call's own arguments (Note [Trial timer]). That is
  // safe only when a variant writes its outputs and nothing else. An op whose call updates
  // tensors in place (optimizer steps, in-place elementwise forms), adds into an output
  // (embedding backward, the device gradient-norm accumulator) or draws random numbers (dropout)
  // cannot be tried more than once per call, so its table declares it with a reason: it then
  // selects by heuristic and order with autotune on, and the dispatch log says why. The reason
  // is given to the table's constructor.
  std::string no_autotune_reason() const override { return snapshot().no_autotune; }

  void set_heuristic(Heuristic h) {
    std::lock_guard<std::mutex> lock(mu_);
    auto next = std::make_unique<Snapshot>(snapshot());
    next->heuristic = std::move(h);
    publish(std::move(next));
  }

  VariantList variants() const { return VariantList(&snapshot().variants); }
  const Variant* find(const std::string& name) const {
    for (const Variant* v : snapshot().variants)
      if (v->name == name) return v;
    return nullptr;
  }

  std::vector<Info> list() const override {
    std::vector<Info> out;
    for (const Variant* v : snapshot().variants)
      out.push_back({v->name, v->device, v->description, tags_of(v->tags, v->opt_in)});
    return out;
  }

  // Every variant with its answer for `p` (device mismatch is a reason too).
  std::vector<Candidate> candidates(const Problem& p) const { return candidates(snapshot(), p); }

  // The variant that runs `p` (Note [Variant selection]). With autotune on and no winner cached
  // for p, `time_variant(v)` is called for every supporting variant (it must run v on scratch
  // outputs and return seconds), in rounds, and the winner is cached (Note [Autotune trials]).
  // Repeated decisions come from the memo (Note [Selection memo]).
  const Variant& select(const Problem& p,
                        const std::function<double(const Variant&)>& time_variant = nullptr) {
    const Snapshot& s = snapshot();  // one snapshot for the whole decision
    // With the dispatch log on, every decision is made (and logged) in full.
    // The forced name and the autotune switch are read once: the decision is made with the
    // values it is memoised under, even while another thread changes them.
    const Inputs in{forced_variant(op_), autotune_enabled()};
    if (dispatch_verbose()) return decide(s, p, time_variant, in);
    MemoKey key{&s, selection_context(in.autotune && time_variant != nullptr), in.forced, p};
    const Variant* hit = nullptr;
    {
      std::shared_lock<std::shared_mutex> lock(memo_mu_);
      if (auto it = memo_.find(key); it != memo_.end()) hit = it->second;
    }
    if (hit != nullptr) {
      count_selection_memo_hit();
      if (selection_memo_check()) check_memo_hit(*hit, decide(s, p, time_variant, in), p);
      return *hit;
    }
    const Variant& chosen = decide(s, p, time_variant, in);  // throws when nothing fits
    std::unique_lock<std::shared_mutex> lock(memo_mu_);
    if (memo_.size() >= kMemoCapacity) memo_.clear();
    memo_.emplace(std::move(key), &chosen);
    return chosen;
  }

  // select() without the memo: every rule of Note [Variant selection] evaluated afresh. The
  // reference that the memo is tested against (tests/test_selection_memo.cpp).
  const Variant& select_uncached(
      const Problem& p, const std::function<double(const Variant&)>& time_variant = nullptr) {
    return decide(snapshot(), p, time_variant, {forced_variant(op_), autotune_enabled()});
  }

  // Runs `args` on the selected variant.
  void run(const Args& args, const std::function<double(const Variant&)>& time_variant = nullptr) {
    select(args.problem, time_variant).fn(args);
  }

  std::vector<AutotuneRecord> autotune_records() const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<AutotuneRecord> out;
    out.reserve(tuned_.size());
    for (const auto& entry : tuned_) out.push_back(entry.second);
    return out;
  }

  void clear_autotune_cache() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tuned_.clear();
    }
    std::unique_lock<std::shared_mutex> lock(memo_mu_);
    memo_.clear();
  }

 private:
  struct Snapshot {
    std::vector<const Variant*> variants;  // in the order of order_, `ref` last
    Heuristic heuristic;
    std::string no_autotune;  // Note [Ops that do not autotune]
  };
  // What a decision depends on (Note [Selection memo]).
  struct MemoKey {
    const Snapshot* snapshot = nullptr;
    unsigned context = 0;  // selection_context()
    std::string forced;    // forced_variant(op_)
    Problem problem;
    bool operator==(const MemoKey&) const = default;
  };
  struct MemoHash {
    std::size_t operator()(const MemoKey& k) const {
      std::size_t h = problem_hash(k.problem);
      hash_mix(h, std::hash<const void*>{}(k.snapshot));
      hash_mix(h, k.context);
      hash_mix(h, std::hash<std::string>{}(k.forced));
      return h;
    }
  };
  // Distinct decisions kept; a full memo is emptied (a training loop repeats a few hundred).
  static constexpr std::size_t kMemoCapacity = 4096;

  void check_memo_hit(const Variant& memo, const Variant& full, const Problem& p) const {
    ANVIL_CHECK(&memo == &full, op_.c_str(), "selection memo returned '", memo.name,
                "' where the full decision is '", full.name, "' for ", p.repr());
  }

  // Note [Variant selection], evaluated in full on snapshot s.
  // The settings a decision reads besides the problem and the snapshot.
  struct Inputs {
    std::string forced;  // forced_variant(op_)
    bool autotune = false;
  };
  const Variant& decide(const Snapshot& s, const Problem& p,
                        const std::function<double(const Variant&)>& time_variant,
                        const Inputs& in) {
    auto cands = candidates(s, p);
    SelectionPolicy policy;
    policy.forced = in.forced;
    for (std::size_t i = 0; i < cands.size(); ++i)
      if (s.variants[i]->opt_in && cands[i].support.ok && s.variants[i]->name != policy.forced)
        cands[i].support = Support::no("opt-in: runs only when forced by name");
    if (policy.forced.empty() && in.autotune) {
      if (!s.no_autotune.empty())
        policy.autotune_note = "off for this op: " + s.no_autotune;
      else if (!time_variant)
        policy.autotune_note = "no trial for this call";
      else
        policy.tuned_winner = tuned_winner(s, p, cands, time_variant, policy.autotune_note);
    }
    if (s.heuristic) policy.heuristic_pick = s.heuristic(p);
    const std::string repr = p.repr();
    const std::size_t chosen = select_variant(op_, repr, cands, policy);
    if (dispatch_verbose()) report_selection(op_, p.key(), repr, cands, chosen, policy);
    return *s.variants[chosen];
  }

  const Snapshot& snapshot() const { return *current_.load(std::memory_order_acquire); }
  // Index of `name` in order_, or order_.size(). Caller holds mu_.
  std::size_t position(const std::string& name) const {
    return static_cast<std::size_t>(std::find(order_.begin(), order_.end(), name) - order_.begin());
  }
  static std::string join(const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
  }
  // Publishes a snapshot with v added, in the order of order_, which names v. Caller holds mu_.
  void insert(Variant v) {
    if (host_profile_enabled() && v.fn) {  // Note [Host profile]
      v.fn = [fn = std::move(v.fn), slot = host_profile_slot(op_, v.name)](const Args& a) {
        const HostProfileScope timed(slot);
        fn(a);
      };
    }
    const Snapshot& cur = snapshot();
    for (const Variant* e : cur.variants)
      ANVIL_CHECK(e->name != v.name, op_.c_str(), "variant '", v.name, "' registered twice");
    nodes_.push_back(std::make_unique<const Variant>(std::move(v)));
    auto next = std::make_unique<Snapshot>(cur);
    next->variants.push_back(nodes_.back().get());
    std::map<std::string, std::size_t> rank;
    for (std::size_t i = 0; i < order_.size(); ++i) rank[order_[i]] = i;
    std::sort(next->variants.begin(), next->variants.end(),
              [&rank](const Variant* a, const Variant* b) {
                return rank.at(a->name) < rank.at(b->name);
              });
    publish(std::move(next));
  }
  // Caller holds mu_ (or is the constructor).
  void publish(std::unique_ptr<Snapshot> next) {
    current_.store(next.get(), std::memory_order_release);
    snapshots_.push_back(std::move(next));
  }

  static std::vector<Candidate> candidates(const Snapshot& s, const Problem& p) {
    std::vector<Candidate> out;
    out.reserve(s.variants.size());
    for (const Variant* v : s.variants) {
      Support sup;
      if (v->device != p.device_type())
        sup =
            Support::no(std::string("runs on ") + (v->device == DeviceType::cpu ? "cpu" : "cuda"));
      else if (v->supports)
        sup = v->supports(p);
      out.push_back({v->name, std::move(sup)});
    }
    return out;
  }

  // The cached winner for p, or autotune's trials and their winner (Note [Autotune trials]),
  // with what was timed as the dispatch log's note.
  std::string tuned_winner(const Snapshot& s, const Problem& p, const std::vector<Candidate>& cands,
                           const std::function<double(const Variant&)>& time_variant,
                           std::string& note) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = tuned_.find(p); it != tuned_.end()) {
        note = describe_trials(it->second);
        return it->second.winner;
      }
    }
    // Timed outside the lock: two threads may time the same new problem; both store a winner.
    std::vector<const Variant*> timed;
    for (std::size_t i = 0; i < s.variants.size(); ++i)
      if (cands[i].support.ok && s.variants[i]->name != "ref") timed.push_back(s.variants[i]);
    if (timed.empty()) return {};
    AutotuneRecord r;
    r.problem = p.repr();
    r.seed = autotune_seed();
    r.seconds.assign(timed.size(), -1);
    for (int round = 0; round < kAutotuneRounds; ++round) {
      for (const std::size_t i : trial_order(timed.size(), r.seed, p.key(), round)) {
        const double t = time_variant(*timed[i]);
        r.order.push_back(timed[i]->name);
        if (round > 0 && (r.seconds[i] < 0 || t < r.seconds[i])) r.seconds[i] = t;
      }
    }
    for (const Variant* v : timed) r.variants.push_back(v->name);
    r.winner = r.variants[autotune_pick(r.seconds)];
    note = describe_trials(r);
    std::lock_guard<std::mutex> lock(mu_);
    return tuned_.insert_or_assign(p, std::move(r)).first->second.winner;
  }

  std::string op_;
  std::atomic<const Snapshot*> current_{nullptr};           // Note [Variant snapshots]
  mutable std::mutex mu_;                                   // guards the members below and writers
  std::vector<std::unique_ptr<const Variant>> nodes_;       // every variant, never moved
  std::vector<std::unique_ptr<const Snapshot>> snapshots_;  // every snapshot published
  std::unordered_map<Problem, AutotuneRecord, ProblemHasher> tuned_;  // autotune winners
  mutable std::shared_mutex memo_mu_;                                 // guards memo_
  std::unordered_map<MemoKey, const Variant*, MemoHash> memo_;        // Note [Selection memo]
  std::vector<std::string> order_{"ref"};                             // Note [Variant order]
  bool order_declared_ = false;
};

}  // namespace anvil
