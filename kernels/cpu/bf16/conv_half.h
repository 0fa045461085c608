// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the 16-bit conv2d fallbacks (every tensor bf16 or f16, f32 accumulation):
//   cpu.bf16_via_f32  widen to f32, run cpu.im2col, round the outputs back; where the CPU lacks
//                     avx512_bf16 (or a test masked it), cpu.onednn.bf16 declines and this runs;
//   cpu.f16_via_f32   f16 the same way (no f16 convolution instruction is used on the CPU).
// See docs/kernels/bf16.md.
namespace anvil::kernels {

// Adds the two variants to conv_table(). Called once from register_builtin_kernels().
void register_conv_half();

}  // namespace anvil::kernels
