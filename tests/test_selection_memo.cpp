// SPDX-License-Identifier: Apache-2.0
// The selection memo (Note [Selection memo], engine/dispatch/variant_table.h): select() keeps
// each decision, and must return exactly what the full decision (select_uncached) returns,
// whatever changed in between: forcing, the autotune switch, trials, new variants, the OpenMP
// thread count that heuristics read. Whole model steps run with every memo hit checked against
// the full decision (set_selection_memo_check).
#include <catch2/catch.hpp>
#include <omp.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "anvil/anvil.h"
#include "engine/dispatch/selection.h"
#include "engine/dispatch/variant_table.h"
#include "models/training_step.h"

using namespace anvil;

namespace {

struct MemoProblem {
  int size = 0;
  DeviceType device_type() const { return DeviceType::cpu; }
  bool operator==(const MemoProblem&) const = default;
  auto fields() const { return std::tie(size); }
  std::string key() const { return std::to_string(size); }
  std::string repr() const { return "memo size=" + std::to_string(size); }
};
struct MemoArgs {
  MemoProblem problem;
};
using MemoTable = VariantTable<MemoProblem, MemoArgs>;

MemoTable::Variant named(const std::string& name, int divisor = 1) {
  return {.name = name,
          .supports =
              [divisor](const MemoProblem& p) {
                return p.size % divisor == 0 ? Support::yes() : Support::no("not divisible");
              },
          .fn = [](const MemoArgs&) {}};
}

// Turns the memo check on for one scope.
struct MemoCheck {
  MemoCheck() { set_selection_memo_check(true); }
  ~MemoCheck() { set_selection_memo_check(false); }
  MemoCheck(const MemoCheck&) = delete;
  MemoCheck& operator=(const MemoCheck&) = delete;
};

// Restores OpenMP's thread count.
struct ThreadsGuard {
  int saved = omp_get_max_threads();
  ThreadsGuard() = default;
  ~ThreadsGuard() { omp_set_num_threads(saved); }
  ThreadsGuard(const ThreadsGuard&) = delete;
  ThreadsGuard& operator=(const ThreadsGuard&) = delete;
};

}  // namespace

TEST_CASE("a repeated selection comes from the memo", "[dispatch][memo]") {
  MemoTable t("memo_repeat");
  t.set_order({"even", "ref"});
  t.add({.name = "ref", .fn = [](const MemoArgs&) {}});
  t.add(named("even", 2));
  const std::uint64_t hits0 = selection_memo_hits();
  CHECK(t.select({4}).name == "even");
  CHECK(t.select({3}).name == "ref");
  CHECK(selection_memo_hits() == hits0);  // two new problems: no hit
  CHECK(&t.select({4}) == &t.select_uncached({4}));
  CHECK(&t.select({3}) == &t.select_uncached({3}));
  CHECK(selection_memo_hits() == hits0 + 2);
}

TEST_CASE("the memo follows forcing, new variants, autotune and the thread count",
          "[dispatch][memo]") {
  MemoCheck check;
  MemoTable t("memo_changes");
  t.set_order({"fast", "even", "ref"});
  t.add({.name = "ref", .fn = [](const MemoArgs&) {}});
  t.add(named("even", 2));
  const MemoProblem p{6};
  REQUIRE(t.select(p).name == "even");
  REQUIRE(t.select(p).name == "even");

  SECTION("a ForceVariant guard, and its end") {
    {
      ForceVariant force("memo_changes", "ref");
      CHECK(t.select(p).name == "ref");
      CHECK(t.select(p).name == "ref");
    }
    CHECK(t.select(p).name == "even");
  }
  SECTION("process-wide forcing") {
    set_forced_variant("memo_changes", "ref");
    CHECK(t.select(p).name == "ref");
    set_forced_variant("memo_changes", "");
    CHECK(t.select(p).name == "even");
  }
  SECTION("a variant added later that comes first in the order") {
    t.add(named("fast", 3));
    CHECK(t.select(p).name == "fast");
    CHECK(t.select({4}).name == "even");
  }
  SECTION("autotune: on with a trial, the fastest; off again, the order") {
    const auto timer = [](const MemoTable::Variant& v) { return v.name == "ref" ? 1.0 : 2.0; };
    t.add(named("fast", 3));
    const auto slow_fast = [](const MemoTable::Variant& v) { return v.name == "fast" ? 3.0 : 1.0; };
    set_autotune(true);
    CHECK(t.select(p, slow_fast).name == "even");  // timed: `even` beats `fast`; ref not timed
    CHECK(t.select(p, slow_fast).name == "even");
    CHECK(t.select(p).name == "fast");         // no trial: the order, not the tuned winner
    CHECK(t.select(p, timer).name == "even");  // the tuned winner is cached, not re-timed
    set_autotune(false);
    CHECK(t.select(p, slow_fast).name == "fast");
    set_autotune(true);
    t.clear_autotune_cache();
    const auto fast_wins = [](const MemoTable::Variant& v) { return v.name == "fast" ? 1.0 : 3.0; };
    CHECK(t.select(p, fast_wins).name == "fast");
    set_autotune(false);
  }
  SECTION("a heuristic that reads the OpenMP thread count") {
    ThreadsGuard threads;
    t.set_heuristic([](const MemoProblem&) { return omp_get_max_threads() > 1 ? "ref" : ""; });
    omp_set_num_threads(1);
    CHECK(t.select(p).name == "even");
    CHECK(t.select(p).name == "even");
    omp_set_num_threads(2);
    CHECK(t.select(p).name == "ref");
    CHECK(t.select(p).name == "ref");
    // Inside a parallel region a heuristic sees omp_in_parallel(): part of the key as well.
    t.set_heuristic([](const MemoProblem&) { return omp_in_parallel() ? "ref" : ""; });
    CHECK(t.select(p).name == "even");
    std::string inside;
#pragma omp parallel num_threads(2)
    {
#pragma omp single
      inside = t.select(p).name;
    }
    CHECK(inside == "ref");  // a team of two threads: an active region
  }
}

TEST_CASE("the memo check catches a decision that depends on state the memo does not see",
          "[dispatch][memo]") {
  // A heuristic that reads a variable outside the memo key: the memo returns the old decision,
  // and the check reports it. This is what the model-step test below would catch in a real
  // table, so it must be able to fail.
  static int hidden = 0;
  MemoCheck check;
  MemoTable t("memo_hidden_state");
  t.set_order({"even", "ref"});
  t.add({.name = "ref", .fn = [](const MemoArgs&) {}});
  t.add(named("even", 2));
  t.set_heuristic([](const MemoProblem&) { return hidden != 0 ? "ref" : ""; });
  hidden = 0;
  CHECK(t.select({2}).name == "even");
  hidden = 1;
  CHECK_THROWS_WITH(t.select({2}), Catch::Contains("memo_hidden_state") &&
                                       Catch::Contains("'even'") && Catch::Contains("'ref'") &&
                                       Catch::Contains("memo size=2"));
}

TEST_CASE("a full memo is emptied and still answers correctly", "[dispatch][memo]") {
  MemoCheck check;
  MemoTable t("memo_capacity");
  t.set_order({"even", "ref"});
  t.add({.name = "ref", .fn = [](const MemoArgs&) {}});
  t.add(named("even", 2));
  for (int round = 0; round < 2; ++round)
    for (int size = 1; size <= 5000; ++size)  // more distinct problems than the memo keeps
      REQUIRE(t.select({size}).name == (size % 2 == 0 ? "even" : "ref"));
}

TEST_CASE("model steps: every memo hit equals the full decision", "[dispatch][memo][models]") {
  MemoCheck check;
  ThreadsGuard threads;
  struct Case {
    const char* model;
    std::int64_t batch;
  };
  for (const int nt : {1, 2}) {
    set_num_threads(nt);
    for (const Case& c : {Case{"mlp_mnist", 8}, Case{"cnn_mnist", 2}, Case{"resnet50", 1},
                          Case{"lstm32", 2}, Case{"ptb_small", 2}}) {
      INFO(c.model << " batch " << c.batch << " threads " << nt);
      const std::uint64_t hits0 = selection_memo_hits();
      models::TrainingStep step(c.model, c.batch);
      step.train_step();
      step.train_step();  // the same problems again: memo hits, each checked
      step.inference_step();
      CHECK(std::isfinite(step.last_loss()));
      CHECK(selection_memo_hits() > hits0);
    }
  }
}
