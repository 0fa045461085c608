// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the CPU variants of the embedding table (engine/dispatch/embedding_problem.h):
// cpu.omp (the OpenMP gather / column-blocked scatter-add of kernels/cpu/omp/embedding_omp.cpp)
// and ref (serial loops). Called by register_builtin_kernels().
namespace anvil::kernels {

void register_embedding_cpu();  // kernels/cpu/embedding_cpu.cpp

}  // namespace anvil::kernels
