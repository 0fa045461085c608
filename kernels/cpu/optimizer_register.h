// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the CPU variants of the optimizer tables (sgd_update, adam_update, grad_norm,
// grad_scale; engine/dispatch/optimizer_problem.h) and of the dropout table
// (engine/dispatch/dropout_problem.h). Called by register_builtin_kernels().
namespace anvil::kernels {

void register_optimizer_ref();  // ref: serial loops (kernels/cpu/ref/optimizer_ref.cpp)
void register_optimizer_omp();  // cpu.omp: the fused OpenMP kernels
                                // (kernels/cpu/omp/optimizer_omp.cpp)
void register_dropout_cpu();    // ref (host Philox) and cpu.mt19937 (kernels/cpu/dropout_cpu.cpp)

}  // namespace anvil::kernels
