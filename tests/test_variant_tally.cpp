// SPDX-License-Identifier: Apache-2.0
// The variant-harness guard (tests/helpers/variant_tally.h): a registered variant that declines
// every problem fails the harness instead of passing with warnings; ref and variants on another
// device are not held to the minimum. The harness itself (tests/helpers/variant_harness.h): a
// variant that computes a wrong result, throws, declines everything, or (with require_all)
// declines one problem fails it; each variant runs forced by name.
#include <catch2/catch.hpp>

#include <string>
#include <tuple>
#include <vector>

#include "engine/dispatch/variant_table.h"
#include "engine/dispatch/selection.h"
#include "helpers/variant_harness.h"
#include "helpers/variant_tally.h"

using namespace anvil;

namespace {

struct TallyProblem {
  int size = 0;
  DeviceType device_type() const { return DeviceType::cpu; }
  bool operator==(const TallyProblem&) const = default;
  auto fields() const { return std::tie(size); }
  std::string key() const { return std::to_string(size); }
  std::string repr() const { return "tally size=" + std::to_string(size); }
};
struct TallyArgs {
  TallyProblem problem;
};
using TallyTable = VariantTable<TallyProblem, TallyArgs>;

// ref, a variant that runs everything, one on cuda, and (with_decliner) one that declines all.
TallyTable& table(bool with_decliner) {
  auto make = [](const char* op, bool decliner) {
    auto* t = new TallyTable(op);  // leaked: tables stay in the global index
    t->set_order({"decliner", "good", "gpu", "ref"});
    t->add({.name = "ref", .fn = [](const TallyArgs&) {}});
    t->add({.name = "good", .fn = [](const TallyArgs&) {}});
    t->add({.name = "gpu", .device = DeviceType::cuda, .fn = [](const TallyArgs&) {}});
    if (decliner)
      t->add({.name = "decliner",
              .supports = [](const TallyProblem&) { return Support::no("declines everything"); },
              .fn = [](const TallyArgs&) {}});
    return t;
  };
  static TallyTable* plain = make("test.tally.plain", false);
  static TallyTable* declining = make("test.tally.declining", true);
  return with_decliner ? *declining : *plain;
}

// The shape of every variant harness: each problem on each supporting variant.
int run_harness(TallyTable& t, int minimum) {
  anvil::test::VariantTally tally(t, minimum);
  for (int size = 1; size <= 5; ++size) {
    const TallyProblem p{size};
    const auto cands = t.candidates(p);
    for (const auto& c : cands) {
      if (!c.support.ok) {
        ++tally.skipped[c.name][c.support.reason];
        continue;
      }
      ++tally.ran[c.name];
    }
  }
  return tally.check();
}

}  // namespace

TEST_CASE("a harness whose variants all ran the minimum passes", "[variants][tally]") {
  CHECK(run_harness(table(false), 5) == 0);
}

// [!shouldfail]: Catch reports this case passed only if an assertion in it failed, which is
// what VariantTally::check() must do for the declining variant.
TEST_CASE("a variant that declines every problem fails the harness",
          "[variants][tally][!shouldfail]") {
  run_harness(table(true), 1);
}

TEST_CASE("a variant that ran fewer problems than the minimum is counted", "[variants][tally]") {
  // Counted without Catch failing this case: a fresh tally checked by hand.
  TallyTable& t = table(true);
  anvil::test::VariantTally tally(t, 3);
  tally.ran["good"] = 3;
  tally.ran["decliner"] = 3;
  CHECK(tally.check() == 0);
}

TEST_CASE("a variant for other dtypes that declines for its dtype alone is not counted",
          "[variants][tally]") {
  TallyTable& t = table(true);
  anvil::test::VariantTally tally(t, 3);
  tally.ran["good"] = 3;
  tally.skipped["decliner"]["decliner handles bf16 only, not f32"] = 3;
  CHECK(tally.check() == 0);
}

// [!shouldfail]: one other reason among its declines and the variant is held to the minimum.
TEST_CASE("a variant that also declines for another reason than its dtype is counted",
          "[variants][tally][!shouldfail]") {
  TallyTable& t = table(true);
  anvil::test::VariantTally tally(t, 3);
  tally.ran["good"] = 3;
  tally.skipped["decliner"]["decliner handles bf16 only, not f32"] = 2;
  tally.skipped["decliner"]["declines everything"] = 1;
  tally.check();
}

// ---- the harness (tests/helpers/variant_harness.h) on a private table ---------------------------

namespace {

struct HarnessArgs {
  TallyProblem problem;
  int* out = nullptr;  // the variant writes size * 2 (the right answer) or something else
};
using HarnessTable = VariantTable<TallyProblem, HarnessArgs>;  // the same problems

// ref and "good" compute 2 * size; `bad` is added as given.
HarnessTable& harness_table(const char* op, HarnessTable::Variant bad) {
  auto* t = new HarnessTable(op);  // leaked: tables stay in the global index
  t->add({.name = "ref", .fn = [](const HarnessArgs& a) { *a.out = 2 * a.problem.size; }});
  t->add(VariantPlace::first(),
         {.name = "good", .fn = [](const HarnessArgs& a) { *a.out = 2 * a.problem.size; }});
  t->add(VariantPlace::last(), std::move(bad));
  return *t;
}

// Each size on every variant, compared with ref's answer; returns the harness's finish().
int run_sizes(HarnessTable& t, int minimum, bool require_all = false) {
  anvil::test::VariantHarness harness(t, DeviceType::cpu, minimum);
  if (require_all) harness.require_all();
  for (int size = 1; size <= 4; ++size) {
    int want = 0;
    t.find("ref")->fn({{size}, &want});
    harness.run(t, TallyProblem{size}, "", [&](const HarnessTable::Variant& v) {
      int got = -1;
      v.fn({{size}, &got});
      return got == want ? std::string() : "got " + std::to_string(got);
    });
  }
  return harness.finish();
}

}  // namespace

TEST_CASE("the harness passes variants that agree with ref and forces each by name",
          "[variants][harness]") {
  static HarnessTable& t = harness_table(
      "test.harness.ok",
      {.name = "exact", .fn = [](const HarnessArgs& a) { *a.out = 2 * a.problem.size; }});
  CHECK(run_sizes(t, 4, true) == 0);
  anvil::test::VariantHarness harness(t, DeviceType::cpu, 1);
  std::vector<std::string> forced;
  harness.run(t, TallyProblem{1}, "", [&](const HarnessTable::Variant& v) {
    forced.push_back(forced_variant("test.harness.ok"));
    return forced.back() == v.name ? std::string() : "not forced";
  });
  CHECK(forced == std::vector<std::string>{"good", "exact", "ref"});
  CHECK(harness.finish() == 0);
}

TEST_CASE("the harness fails a variant whose result differs from ref",
          "[variants][harness][!shouldfail]") {
  static HarnessTable& t = harness_table(
      "test.harness.wrong",
      {.name = "wrong", .fn = [](const HarnessArgs& a) { *a.out = 2 * a.problem.size + 1; }});
  run_sizes(t, 1);
}

TEST_CASE("the harness fails a variant that throws", "[variants][harness][!shouldfail]") {
  static HarnessTable& t = harness_table(
      "test.harness.throws",
      {.name = "throws", .fn = [](const HarnessArgs&) { throw Error("throws: not implemented"); }});
  run_sizes(t, 1);
}

TEST_CASE("the harness fails a variant that declines every problem",
          "[variants][harness][!shouldfail]") {
  static HarnessTable& t = harness_table(
      "test.harness.declines",
      {.name = "decliner",
       .supports = [](const TallyProblem&) { return Support::no("declines everything"); },
       .fn = [](const HarnessArgs&) {}});
  run_sizes(t, 1);
}

namespace {
// A variant that declines size 3 of the four sizes.
HarnessTable& declines_one_table() {
  static HarnessTable& t =
      harness_table("test.harness.declines_one",
                    {.name = "no_size_3",
                     .supports =
                         [](const TallyProblem& p) {
                           return p.size == 3 ? Support::no("size 3") : Support::yes();
                         },
                     .fn = [](const HarnessArgs& a) { *a.out = 2 * a.problem.size; }});
  return t;
}
}  // namespace

TEST_CASE("require_all fails a variant that declines one problem",
          "[variants][harness][!shouldfail]") {
  run_sizes(declines_one_table(), 1, /*require_all=*/true);
}

TEST_CASE("the same decline passes a harness whose minimum it meets", "[variants][harness]") {
  CHECK(run_sizes(declines_one_table(), 3) == 0);
}
