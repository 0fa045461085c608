// SPDX-License-Identifier: Apache-2.0
// The variant-harness guard (tests/helpers/variant_tally.h): a registered variant that declines
// every problem fails the harness instead of passing with warnings; ref and variants on another
// device are not held to the minimum.
#include <catch2/catch.hpp>

#include <string>

#include "engine/dispatch/variant_table.h"
#include "helpers/variant_tally.h"

using namespace anvil;

namespace {

struct TallyProblem {
  int size = 0;
  DeviceType device_type() const { return DeviceType::cpu; }
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
