// SPDX-License-Identifier: Apache-2.0
// Note [Variant order] (engine/dispatch/variant_table.h): a table's order is one declared list;
// add() takes a variant's place from it and refuses names it does not hold; explicit placement
// for run-time variants; tables leave the global index when destroyed; the built-in lists
// (kernels/variant_order.cpp) name exactly the variants that register. Also the dispatch log's
// line (Note [Dispatch log], engine/dispatch/selection.h) as describe_selection() writes it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "engine/core/cuda_backend.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/dispatch/variant_table.h"
#include "kernels/cudnn_conv_plan.h"
#include "kernels/register.h"

using namespace anvil;
using Catch::Contains;

namespace {

struct OrderProblem {
  DeviceType device_type() const { return DeviceType::cpu; }
  bool operator==(const OrderProblem&) const = default;
  auto fields() const { return std::tuple<>(); }
  std::string key() const { return "order"; }
  std::string repr() const { return "order problem"; }
};
struct OrderArgs {
  OrderProblem problem;
};
using OrderTable = VariantTable<OrderProblem, OrderArgs>;

OrderTable::Variant named(const std::string& name) {
  return {.name = name, .fn = [](const OrderArgs&) {}};
}

std::vector<std::string> names_of(const OrderTable& t) {
  std::vector<std::string> out;
  for (const auto& v : t.variants()) out.push_back(v.name);
  return out;
}

using Names = std::vector<std::string>;

}  // namespace

TEST_CASE("add() places variants by the declared order, whatever the registration order",
          "[dispatch][order]") {
  OrderTable t("test.order.declared");
  t.set_order({"fast", "medium", "slow", "ref"});
  t.add(named("ref"));
  t.add(named("slow"));
  t.add(named("fast"));
  CHECK(names_of(t) == Names{"fast", "slow", "ref"});
  t.add(named("medium"));
  CHECK(names_of(t) == Names{"fast", "medium", "slow", "ref"});
  CHECK(t.order() == Names{"fast", "medium", "slow", "ref"});
  std::vector<std::string> listed;
  for (const auto& i : t.list()) listed.push_back(i.name);
  CHECK(listed == names_of(t));
  CHECK(t.select({}).name == "fast");
}

TEST_CASE("a variant the declared order does not name is an error at registration",
          "[dispatch][order]") {
  OrderTable t("test.order.strict");
  t.set_order({"a", "ref"});
  CHECK_THROWS_WITH(t.add(named("b")), Contains("test.order.strict") && Contains("'b'") &&
                                           Contains("declared order [a, ref]") &&
                                           Contains("kernels/variant_order.cpp"));
  t.add(named("a"));
  CHECK_THROWS_WITH(t.add(named("a")), Contains("'a'") && Contains("twice"));
  // A table whose order was never declared knows only `ref`.
  OrderTable bare("test.order.bare");
  bare.add(named("ref"));
  CHECK_THROWS_WITH(bare.add(named("x")), Contains("'x'") && Contains("declared order [ref]"));
}

TEST_CASE("set_order() takes unique names ending with ref, once, before any variant",
          "[dispatch][order]") {
  OrderTable t("test.order.set");
  CHECK_THROWS_WITH(t.set_order({"a", "b"}), Contains("end with 'ref'"));
  CHECK_THROWS_WITH(t.set_order({}), Contains("end with 'ref'"));
  CHECK_THROWS_WITH(t.set_order({"a", "b", "a", "ref"}), Contains("'a' listed twice"));
  t.set_order({"a", "ref"});
  CHECK_THROWS_WITH(t.set_order({"b", "ref"}), Contains("once, before any variant"));
  OrderTable u("test.order.late");
  u.add(named("ref"));
  CHECK_THROWS_WITH(u.set_order({"a", "ref"}), Contains("once, before any variant"));
}

TEST_CASE("run-time variants are placed explicitly: first, before, after, last before ref",
          "[dispatch][order]") {
  OrderTable t("test.order.place");
  t.set_order({"a", "b", "ref"});
  t.add(named("ref"));
  t.add(named("b"));
  t.add(VariantPlace::first(), named("x"));
  t.add(VariantPlace::last(), named("y"));
  t.add(VariantPlace::before("b"), named("z"));
  t.add(VariantPlace::after("a"), named("w"));  // "a" is declared, not registered: fine
  CHECK(t.order() == Names{"x", "a", "w", "z", "b", "y", "ref"});
  CHECK(names_of(t) == Names{"x", "w", "z", "b", "y", "ref"});
  t.add(named("a"));  // the declared name still takes its place
  CHECK(names_of(t) == Names{"x", "a", "w", "z", "b", "y", "ref"});
  CHECK_THROWS_WITH(t.add(VariantPlace::after("ref"), named("q")),
                    Contains("`ref` is always last"));
  CHECK_THROWS_WITH(t.add(VariantPlace::before("nope"), named("q")),
                    Contains("'nope', which is not in the declared order"));
  CHECK_THROWS_WITH(t.add(VariantPlace::before("b2"), named("b2")),
                    Contains("not in the declared"));
  OrderTable u("test.order.place2");
  u.set_order({"a", "ref"});
  CHECK_THROWS_WITH(u.add(VariantPlace::first(), named("a")),
                    Contains("in the declared order already"));
  CHECK(u.order() == Names{"a", "ref"});  // a refused placement changes nothing
}

TEST_CASE("a table leaves the global index when it is destroyed", "[dispatch][order]") {
  register_builtin_kernels();
  const auto before = variant_tables().size();
  {
    OrderTable t("test.order.scoped");
    t.add(named("ref"));
    CHECK(find_variant_table("test.order.scoped") == &t);
    CHECK(variant_tables().size() == before + 1);
  }
  CHECK(find_variant_table("test.order.scoped") == nullptr);
  CHECK(variant_tables().size() == before);
  for (auto* t : variant_tables()) CHECK(t->op() != "test.order.scoped");
}

TEST_CASE("the built-in orders name exactly the variants that register", "[dispatch][order]") {
  register_builtin_kernels();
  // In a build with the CUDA backend, asking for it loads the library, which registers its
  // variants before it counts devices (also without a GPU): then every listed name must be
  // registered. Without the library only the CPU names can be checked here.
  (void)cuda_backend();
  bool cuda_registered = false;
  for (auto* t : variant_tables())
    for (const auto& v : t->list()) cuda_registered |= v.device == DeviceType::cuda;
  INFO("CUDA variants registered: " << cuda_registered);
  int tables = 0;
  for (auto* t : variant_tables()) {
    if (t->op().rfind("test.", 0) == 0) continue;  // the other tests' private tables
    ++tables;
    INFO("table " << t->op());
    const auto order = t->order();
    REQUIRE(order.size() >= 2);  // declared (an undeclared table knows only `ref`)
    CHECK(order.back() == "ref");
    Names registered, expected;
    for (const auto& v : t->list()) registered.push_back(v.name);
    for (const auto& n : order)
      if (cuda_registered || n.rfind("cuda.", 0) != 0) expected.push_back(n);
    CHECK(registered == expected);
  }
  CHECK(tables >= 16);
  // The cuDNN conv variants are registered in a loop over the algorithm families: each one is
  // listed, in the families' order.
  const auto conv = conv_table().order();
  std::size_t last = 0;
  for (kernels::CudnnConvAlgo algo : kernels::kCudnnConvAlgos) {
    const auto it = std::find(conv.begin(), conv.end(), kernels::cudnn_variant_name(algo));
    INFO(kernels::cudnn_variant_name(algo));
    REQUIRE(it != conv.end());
    CHECK(static_cast<std::size_t>(it - conv.begin()) > last);
    last = static_cast<std::size_t>(it - conv.begin());
  }
}

TEST_CASE(
    "the dispatch log line names the op, the problem, the choice, its rule and every "
    "declined variant with its reason",
    "[dispatch][log]") {
  const std::vector<Candidate> cands = {{"gpu", Support::no("runs on cuda")},
                                        {"fast", Support::yes()},
                                        {"slow", Support::yes()},
                                        {"ref", Support::yes()}};
  SelectionPolicy none;
  CHECK(describe_selection("op", "op n=3", cands, 1, none) ==
        "anvil dispatch: op=op problem=op n=3 chosen=fast by=order declined: gpu (runs on cuda); "
        "slow (supported, but fast comes first in the order); ref (supported, but fast comes first "
        "in "
        "the order)");
  SelectionPolicy heuristic;
  heuristic.heuristic_pick = "slow";
  CHECK_THAT(describe_selection("op", "op n=3", cands, 2, heuristic),
             Contains("chosen=slow by=heuristic declined: gpu (runs on cuda); fast (supported, but "
                      "the heuristic picks slow)"));
  SelectionPolicy tuned;
  tuned.tuned_winner = "slow";
  tuned.heuristic_pick = "fast";
  CHECK_THAT(describe_selection("op", "p", cands, 2, tuned),
             Contains("by=autotune") && Contains("fast (supported, but autotune picked slow)"));
  SelectionPolicy forced;
  forced.forced = "ref";
  CHECK_THAT(describe_selection("op", "p", cands, 3, forced),
             Contains("chosen=ref by=forced") && Contains("fast (supported, but ref is forced)"));
  CHECK(describe_selection("op", "p", {{"ref", Support::yes()}}, 0, none) ==
        "anvil dispatch: op=op problem=p chosen=ref by=order declined: none");
  // A heuristic pick that does not support the problem is passed over: the order decided.
  SelectionPolicy stale;
  stale.heuristic_pick = "gpu";
  CHECK_THAT(describe_selection("op", "p", cands, 1, stale), Contains("chosen=fast by=order"));
}
