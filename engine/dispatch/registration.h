// SPDX-License-Identifier: Apache-2.0
#pragma once
// The registration seam between the dispatch layer and the kernels (Note [Kernel registration]):
// what fills the variant tables is declared here, in dispatch, and defined by the kernels
// (kernels/register.cpp), so that ops, autograd and optim never include kernels/.
namespace anvil {

// Note [Kernel registration]
// The built-in kernels are registered by one explicit function, not by static self-registering
// objects (the linker drops those from static libraries). Every table accessor
// (gemm_table(), conv_table(), ...) and the table index (variant_tables()) call
// register_builtin_kernels() first, so a table is filled the first time anything uses it and no
// op needs to remember to call it. The filling itself reaches the tables through the same
// accessors; a thread-local flag makes those inner calls return at once instead of re-entering
// the once-flag (which would deadlock). Other threads wait until the tables are complete.

// Fills every op's variant table with the kernels compiled into libanvil. Idempotent and
// thread-safe; user code need not call it, but may (benchmarks do, to list variants first).
// Defined in engine/dispatch/registration.cpp.
void register_builtin_kernels();

namespace detail {
// Registers every built-in kernel family into its table, once. Defined in kernels/register.cpp
// (libanvil is one shared library); only register_builtin_kernels() calls it.
void fill_builtin_kernel_tables();
}  // namespace detail

}  // namespace anvil
