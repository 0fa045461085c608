// SPDX-License-Identifier: Apache-2.0
// The registration seam (Note [Kernel registration], engine/dispatch/registration.h): a variant
// table is complete the first time anything uses it, without a call to
// register_builtin_kernels(), also when several threads reach different tables at once. Each
// test case runs in its own process (catch_discover_tests), so nothing has registered before.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/elementwise_problem.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/optimizer_problem.h"
#include "engine/dispatch/variant_table.h"

namespace {

template <typename Table>
bool has_variant(const Table& table, const std::string& name) {
  return table.find(name) != nullptr;
}

}  // namespace

TEST_CASE("a table accessor fills the tables on first use", "[dispatch][registration]") {
  // No register_builtin_kernels() call anywhere in this process.
  const auto& gemm = anvil::gemm_table();
  CHECK(has_variant(gemm, "ref"));
  CHECK(has_variant(gemm, "cpu.blocked"));
  CHECK(gemm.variants().back().name == "ref");
  CHECK(has_variant(anvil::conv_table(), "ref"));
  CHECK(has_variant(anvil::sgd_update_table(), "cpu.omp"));
}

TEST_CASE("the table index lists every built-in table on first use", "[dispatch][registration]") {
  std::vector<std::string> ops;
  for (const auto* t : anvil::variant_tables()) ops.push_back(t->op());
  for (const char* op : {"gemm", "elementwise", "conv2d", "sgd_update", "dropout"})
    CHECK(std::find(ops.begin(), ops.end(), op) != ops.end());
  CHECK(anvil::find_variant_table("softmax") != nullptr);
}

TEST_CASE("threads reaching different tables first all see them complete",
          "[dispatch][registration]") {
  constexpr int kThreads = 8;
  std::vector<int> sizes(kThreads, 0);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([i, &sizes] {
      if (i % 2 == 0)
        sizes[i] = static_cast<int>(anvil::gemm_table().variants().size());
      else
        sizes[i] = static_cast<int>(anvil::elementwise_table().variants().size());
    });
  for (auto& t : threads) t.join();
  const int gemm_size = static_cast<int>(anvil::gemm_table().variants().size());
  const int ew_size = static_cast<int>(anvil::elementwise_table().variants().size());
  CHECK(gemm_size >= 2);  // at least ref and the own blocked kernel
  CHECK(ew_size >= 2);    // ref and cpu.omp
  for (int i = 0; i < kThreads; ++i) CHECK(sizes[i] == (i % 2 == 0 ? gemm_size : ew_size));
}

// Note [Variant tags]: every tag is one of the four words; opt-in variants say so; the variants
// whose numerics a user must know about carry their tag (the CUDA ones when the backend loads).
TEST_CASE("variant tags come from one vocabulary and mark the variants they describe",
          "[dispatch][registration]") {
  const std::vector<std::string> vocabulary{anvil::kTagTf32, anvil::kTagNondeterministic,
                                            anvil::kTagWorkspace, anvil::kTagOptIn};
  auto tags = [](const std::string& op, const std::string& name) {
    for (const auto& v : anvil::find_variant_table(op)->list())
      if (v.name == name) return v.tags;
    return std::vector<std::string>{"<not registered>"};
  };
  auto has = [](const std::vector<std::string>& t, const char* tag) {
    return std::find(t.begin(), t.end(), tag) != t.end();
  };
  for (const auto* table : anvil::variant_tables())
    for (const auto& v : table->list())
      for (const auto& tag : v.tags) {
        INFO(table->op() << " " << v.name << " tag " << tag);
        CHECK(std::find(vocabulary.begin(), vocabulary.end(), tag) != vocabulary.end());
      }
  CHECK(has(tags("conv2d", "cpu.im2col"), anvil::kTagWorkspace));
  CHECK(has(tags("max_pool2d", "cpu.onednn"), anvil::kTagOptIn));
  CHECK(has(tags("max_pool2d", "cpu.onednn.bf16"), anvil::kTagOptIn));  // drops NaN too
  CHECK_FALSE(has(tags("avg_pool2d", "cpu.onednn.bf16"), anvil::kTagOptIn));
  CHECK(tags("gemm", "cpu.blocked").empty());
  if (anvil::gemm_table().find("cuda.cublas.tf32") != nullptr) {
    CHECK(has(tags("gemm", "cuda.cublas.tf32"), anvil::kTagTf32));
    CHECK(has(tags("gemm", "cuda.cublas.tf32"), anvil::kTagOptIn));
    CHECK(has(tags("conv2d", "cuda.cudnn.implicit_gemm"), anvil::kTagNondeterministic));
  }
}
