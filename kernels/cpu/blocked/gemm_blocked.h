// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the `cpu.blocked` GEMM variant (our own packed, register-blocked f32 GEMM with
// AVX-512 or AVX2+FMA micro-kernels chosen at run time), plus hooks for tests and benchmarks.
namespace anvil::kernels {

// Adds `cpu.blocked` to gemm_table(). Called once from register_builtin_kernels().
void register_gemm_blocked();

// The micro-kernel ISA cpu.blocked uses: "avx512", "avx2", or "none" when the CPU has neither
// (the variant then reports itself unsupported).
const char* gemm_blocked_isa();

// Tests and benchmarks: forces the micro-kernel ISA ("avx512" or "avx2"); "" or "auto" returns
// to the run-time choice. Throws anvil::Error for an unknown name or one this CPU cannot run.
void set_gemm_blocked_isa(const char* isa);

}  // namespace anvil::kernels
