// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the 16-bit GEMM variants (inputs and C in bf16 or f16, f32 accumulation):
//   cpu.bf16_avx512  own vdpbf16ps kernel, only where the CPU has avx512_bf16;
//   cpu.bf16_via_f32 the fallback: widen to f32, run cpu.blocked, round C back;
//   cpu.f16_via_f32  f16 the same way (the CPU has no f16 dot-product instruction we use).
// See docs/kernels/bf16.md.
namespace anvil::kernels {

// Adds the three variants to gemm_table(). Called once from register_builtin_kernels().
void register_gemm_half();

// Whether cpu.bf16_avx512 can run here: the CPU reports avx512_bf16 (and AVX-512F/BW/VL, with
// the OS saving the registers) and no test has masked it.
bool gemm_bf16_native_available();

// Tests: masks (true) or unmasks the CPU's avx512_bf16 feature for the bf16 GEMM variants, as on
// a CPU without it, so that cpu.bf16_avx512 declines and the fallback runs. Clears the GEMM
// table's memoised and tuned decisions, which were made for the other setting.
void set_gemm_bf16_mask_native(bool mask);

}  // namespace anvil::kernels
