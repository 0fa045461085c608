// SPDX-License-Identifier: Apache-2.0
#pragma once
// declare_variant_orders(): the order of every built-in variant table, declared in one place
// (Note [Variant order], engine/dispatch/variant_table.h).
namespace anvil::kernels {

// Declares the order of every built-in table, CPU and CUDA variants together, `ref` last.
// Called first by detail::fill_builtin_kernel_tables() (kernels/register.cpp), before any
// variant is added.
void declare_variant_orders();

}  // namespace anvil::kernels
