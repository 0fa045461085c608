// SPDX-License-Identifier: Apache-2.0
// register_builtin_kernels(): the once-flag that fills the variant tables on first use
// (Note [Kernel registration] in engine/dispatch/registration.h).
#include "engine/dispatch/registration.h"

#include <mutex>

namespace anvil {
namespace {
// True on the thread that is filling the tables, while it does.
thread_local bool tl_filling = false;
}  // namespace

void register_builtin_kernels() {
  if (tl_filling) return;  // the filling reached a table accessor: the table is being filled
  static std::once_flag once;
  std::call_once(once, [] {
    struct ResetFlag {
      ~ResetFlag() { tl_filling = false; }
    } reset;
    tl_filling = true;
    detail::fill_builtin_kernel_tables();
  });
}

}  // namespace anvil
