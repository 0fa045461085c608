// SPDX-License-Identifier: Apache-2.0
// The global index of variant tables (engine/dispatch/variant_table.h).
#include <algorithm>
#include <mutex>

#include "engine/dispatch/registration.h"
#include "engine/dispatch/variant_table.h"

namespace anvil {
namespace {
std::mutex& mu() {
  static std::mutex m;
  return m;
}
std::vector<VariantTableBase*>& tables() {
  static std::vector<VariantTableBase*> t;
  return t;
}
}  // namespace

void register_variant_table(VariantTableBase* table) {
  std::lock_guard<std::mutex> lock(mu());
  tables().push_back(table);
}
void unregister_variant_table(VariantTableBase* table) {
  std::lock_guard<std::mutex> lock(mu());
  auto& t = tables();
  t.erase(std::remove(t.begin(), t.end(), table), t.end());
}
std::vector<VariantTableBase*> variant_tables() {
  register_builtin_kernels();  // the built-in tables exist once filled (Note [Kernel registration])
  std::lock_guard<std::mutex> lock(mu());
  return tables();
}
VariantTableBase* find_variant_table(const std::string& op) {
  register_builtin_kernels();
  std::lock_guard<std::mutex> lock(mu());
  for (auto* t : tables())
    if (t->op() == op) return t;
  return nullptr;
}

}  // namespace anvil
