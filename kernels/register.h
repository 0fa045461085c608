// SPDX-License-Identifier: Apache-2.0
#pragma once
// register_builtin_kernels(): fills every op's variant table with the kernels compiled into
// libanvil. Explicit on purpose (static self-registering objects are dropped by the linker from
// static libraries). Idempotent and thread-safe; the ops call it lazily on first use, so user
// code need not, but may, call it up front (benchmarks do, to list variants).
namespace anvil {
void register_builtin_kernels();
}  // namespace anvil
