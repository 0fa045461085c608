// SPDX-License-Identifier: Apache-2.0
// Dispatch under concurrency (Note [Variant snapshots], engine/dispatch/variant_table.h): threads
// select, list and run variants while another thread registers variants, as the CUDA library
// does on its first GPU use; forcing, the autotune switch and its cache change meanwhile. Run
// normally these check results; the ThreadSanitizer stage of scripts/test.sh
// (scripts/tsan.sh) runs them to find the races themselves.
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "anvil/anvil.h"
#include "engine/dispatch/elementwise_problem.h"
#include "engine/dispatch/variant_table.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/gemm.h"
#include "helpers/gradcheck.h"

using namespace anvil;

namespace {

struct StressProblem {
  int size = 0;
  DeviceType device_type() const { return DeviceType::cpu; }
  bool operator==(const StressProblem&) const = default;
  auto fields() const { return std::tie(size); }
  std::string key() const { return "stress " + std::to_string(size); }
  std::string repr() const { return "stress size=" + std::to_string(size); }
};
struct StressArgs {
  StressProblem problem;
  std::string* ran = nullptr;
};
using StressTable = VariantTable<StressProblem, StressArgs>;

// A fresh table per use, kept for the life of the process (reachable from `kept`, so that
// LeakSanitizer does not report them).
StressTable& new_table(const std::string& op) {
  static auto* kept = new std::vector<std::unique_ptr<StressTable>>();
  static std::mutex kept_mu;
  auto* t = new StressTable(op);
  {
    std::lock_guard<std::mutex> lock(kept_mu);
    kept->emplace_back(t);
  }
  t->add({.name = "ref", .fn = [](const StressArgs& a) { *a.ran = "ref"; }});
  return *t;
}

// Variant "v<i>": supports sizes divisible by i % 7 + 2. Added with VariantPlace::first(), so
// later ones come first in the order and win.
StressTable::Variant numbered(int i) {
  const int divisor = i % 7 + 2;
  const std::string name = "v" + std::to_string(i);
  return {.name = name,
          .supports =
              [divisor](const StressProblem& p) {
                return p.size % divisor == 0 ? Support::yes() : Support::no("not divisible");
              },
          .fn = [name](const StressArgs& a) { *a.ran = name; }};
}

// Runs `n` reader threads calling read(thread, iteration) until `write` returns, then joins.
template <typename Read, typename Write>
void readers_during(int n, Read read, Write write) {
  std::atomic<bool> done{false};
  std::atomic<long> reads{0};
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      // At least a few rounds each, even if the writer finishes first.
      for (int i = 0; i < 50 || !done.load(std::memory_order_acquire); ++i) {
        read(t, i);
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  // The writer starts once every reader has read: on a loaded machine it could otherwise finish
  // before the readers were scheduled, and the test would race nothing.
  while (reads.load(std::memory_order_relaxed) < n) std::this_thread::yield();
  write();
  done.store(true, std::memory_order_release);
  for (auto& th : threads) th.join();
  CHECK(reads.load() >= 50L * n);
}

// Four readers select, list and find while 300 variants (then 64 more) are registered.
void register_under_readers(StressTable& t) {
  constexpr int kVariants = 300;
  std::atomic<int> bad{0};
  readers_during(
      4,
      [&](int thread, int i) {
        const StressProblem p{(thread * 7919 + i) % 420 + 1};
        const auto& v = t.select(p);
        std::string ran;
        v.fn({p, &ran});
        // The selected variant supports p and is the first in order that does, among those
        // the reader's snapshot held (so its name is ref or v<i>).
        if (ran != v.name || (v.supports && !v.supports(p).ok)) bad.fetch_add(1);
        std::size_t n = 0;
        int last_index = 1 << 30;
        for (const auto& e : t.variants()) {
          const int index = e.name == "ref" ? -1 : std::stoi(e.name.substr(1));
          if (index >= last_index) bad.fetch_add(1);  // order broken: v<i> descending, then ref
          last_index = index;
          ++n;
        }
        if (n == 0 || t.variants().back().name != "ref") bad.fetch_add(1);
        if (t.find("ref") == nullptr) bad.fetch_add(1);
        if (t.list().size() < n) bad.fetch_add(1);  // a later snapshot is never smaller
      },
      [&] {
        for (int i = 0; i < kVariants; ++i) {
          t.add(VariantPlace::first(), numbered(i));
          if (i % 8 == 7) std::this_thread::yield();  // let the readers run in between
          if (i % 50 == 0)
            t.set_heuristic([i](const StressProblem&) { return "v" + std::to_string(i / 2); });
        }
      });
  CHECK(bad.load() == 0);
  REQUIRE(t.variants().size() == kVariants + 1);
  CHECK(t.variants().front().name == "v" + std::to_string(kVariants - 1));
  CHECK(t.variants().back().name == "ref");
  // A reference from select() survives later registrations (variants never move).
  t.set_heuristic(nullptr);
  const auto& before = t.select({2});
  for (int i = kVariants; i < kVariants + 64; ++i) t.add(VariantPlace::first(), numbered(i));
  CHECK(before.name == "v" + std::to_string(kVariants - 1 - (kVariants - 1) % 7));
  CHECK(t.find(before.name) == &before);
}

}  // namespace

TEST_CASE("select, find and variants() are safe while variants are registered",
          "[dispatch][threads]") {
  // Five fresh tables. With the list changed in place under the readers (as before Note
  // [Variant snapshots]; checked by reverting add() to that), one table whose writer neither
  // waited for the readers nor yielded failed 7 of 10 runs without ThreadSanitizer; with the
  // start barrier, a yield every 8 registrations and five tables, 10 of 10 (docs/results/
  // hardening_reverts_2026-11-25.md). Every selection memo hit (Note [Selection memo]) is
  // checked against the full decision on the same snapshot meanwhile.
  set_selection_memo_check(true);
  for (int round = 0; round < 5; ++round) {
    INFO("table " << round);
    register_under_readers(new_table("test.stress.register." + std::to_string(round)));
  }
  set_selection_memo_check(false);
}

TEST_CASE("forcing, the autotune switch and its cache are safe across threads",
          "[dispatch][threads]") {
  StressTable& t = new_table("test.stress.policy");
  for (int i = 0; i < 8; ++i) t.add(VariantPlace::first(), numbered(i));
  std::atomic<int> bad{0};
  // v0 is the fastest.
  auto timer = [](const StressTable::Variant& v) { return 1.0 + std::stoi(v.name.substr(1)); };
  readers_during(
      4,
      [&](int thread, int i) {
        // Thread-local forcing wins over the process-wide setting the writer flips.
        if (thread % 2 == 0) {
          ForceVariant force("test.stress.policy", "ref");
          if (t.select({i + 1}, timer).name != "ref") bad.fetch_add(1);
        } else {
          const auto& v = t.select({2 * 3 * 4 * 5 * 7}, timer);  // every variant supports it
          // Unforced: the first in order v7, the autotuned v0, or the writer's forced v3.
          if (v.name != "v7" && v.name != "v0" && v.name != "v3") bad.fetch_add(1);
        }
      },
      [&] {
        for (int i = 0; i < 20000; ++i) {
          set_autotune(i % 2 == 0);
          if (i % 3 == 0) t.clear_autotune_cache();
          set_forced_variant("test.stress.policy", i % 5 == 0 ? "v3" : "");
        }
        set_autotune(false);
        set_forced_variant("test.stress.policy", "");
      });
  CHECK(bad.load() == 0);
  CHECK(t.select({2 * 3 * 4 * 5 * 7}).name == "v7");
}

TEST_CASE("ops run from several threads while a library registers variants into their tables",
          "[dispatch][threads]") {
  // What the CUDA library does on first GPU use, with stand-ins that never support a CPU
  // problem: cuda-device variants join the real elementwise and gemm tables mid-run.
  register_builtin_kernels();
  const Tensor x = Tensor::arange(-64, 64, 1).reshape({8, 16});
  const Tensor w = ops::mul_scalar(Tensor::arange(0, 16 * 12, 1).reshape({16, 12}), 1.0 / 64);
  std::vector<double> relu_expected, mm_expected;
  {
    NoGradGuard g;
    relu_expected = test::values_f64(ops::unary(EwOp::relu, x));
    mm_expected = test::values_f64(ops::mm(x, false, w, false));
  }
  auto close = [](const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (std::abs(a[i] - b[i]) > 1e-4 * (1 + std::abs(b[i]))) return false;
    return true;
  };
  std::atomic<int> bad{0};
  readers_during(
      3,
      [&](int, int) {
        NoGradGuard g;
        const auto r = test::values_f64(ops::unary(EwOp::relu, x));
        const auto m = test::values_f64(ops::mm(x, false, w, false));
        if (r != relu_expected || !close(m, mm_expected)) bad.fetch_add(1);
      },
      [&] {
        for (int i = 0; i < 40; ++i) {
          const std::string name = "test.stress.cuda." + std::to_string(i);
          elementwise_table().add(
              VariantPlace::first(),
              {.name = name, .device = DeviceType::cuda, .fn = [](const ElementwiseArgs&) {}});
          gemm_table().add(
              VariantPlace::first(),
              {.name = name, .device = DeviceType::cuda, .fn = [](const GemmArgs&) {}});
        }
      });
  CHECK(bad.load() == 0);
  CHECK(elementwise_table().find("test.stress.cuda.39") != nullptr);
}
