// SPDX-License-Identifier: Apache-2.0
#pragma once
// Internal interface between the bf16 GEMM driver (gemm_half.cpp, baseline x86-64) and its
// AVX-512 BF16 translation unit (gemm_bf16_avx512.cpp). Plain declarations only, for the reason
// given in Note [ISA translation units] (kernels/cpu/blocked/blocked_kernels.h).
//
// Note [bf16 pair packing]
// vdpbf16ps multiplies 32 bf16 pairs and adds each pair's two products into one f32 lane: lane j
// gets a[2j]*b[2j] + a[2j+1]*b[2j+1]. So the depth K is walked two at a time (K2 = ceil(K/2)
// pairs, an odd K padded with a zero), and both operands are packed as 32-bit words holding a
// (low: depth 2l, high: depth 2l+1) pair of bf16 bit patterns:
//   A: a_pairs[i * k2 + l] for row i of op(A), broadcast to all 16 lanes;
//   B: in column blocks of 16: b_pairs[(jb * k2 + l) * 16 + jj] for column jb*16 + jj of op(B),
//      zero beyond N, so one aligned 64-byte load feeds 16 output columns.
// The products are exact in f32 and summed in f32 (the instruction's own accumulation).
#include <cstdint>

namespace anvil::kernels::bf16 {

// c[i * ldc + j] = sum over l of the pair products, for i < rows and j < n (f32, not scaled: the
// driver applies alpha and beta and rounds). col_blocks = ceil(n / 16). Needs avx512_bf16.
void pairs_gemm_avx512bf16(const std::uint32_t* a_pairs, std::int64_t rows, std::int64_t k2,
                           const std::uint32_t* b_pairs, std::int64_t n, float* c,
                           std::int64_t ldc);

}  // namespace anvil::kernels::bf16
