// SPDX-License-Identifier: Apache-2.0
#pragma once
// Internal interface between the generic cpu.blocked driver (gemm_blocked.cpp, baseline x86-64)
// and its ISA-specific translation units (gemm_blocked_avx512.cpp, gemm_blocked_avx2.cpp).
//
// Note [ISA translation units]
// The ISA TUs are compiled with -mavx512* / -mavx2 -mfma. Any inline function or template with
// external linkage that they instantiate (std::min, std::vector<...>::..., an inline helper in a
// shared header) is emitted as a weak COMDAT symbol, and the linker may keep *that* copy for the
// generic code too: the library would then execute AVX-512 instructions on a CPU without them
// (SIGILL) before any run-time check could help. So this header holds only a POD table of
// function pointers and plain declarations, the ISA TUs include nothing but <immintrin.h>,
// <cstdint> and this header, and every helper in them sits in an anonymous namespace.
#include <cstdint>

namespace anvil::kernels::blocked {

// Packed-buffer layout shared with the driver: micro-panel p of a packed A block starts at
// p * mr * kc floats, micro-panel q of a packed B block at q * nr * kc floats; the layout inside a
// panel belongs to the ISA TU. Buffers are 64-byte aligned.
struct IsaKernels {
  const char* isa;  // "avx512" or "avx2"
  int mr, nr;       // register tile of the micro-kernel: mr rows of C x nr columns
  int mc, kc, nc;   // cache blocking (Note [Blocking] in the ISA TU)

  // Packs op(A)[0:mc, 0:kc] into ceil(mc/mr) micro-panels at dst. `a` points at element (0, 0)
  // of op(A): with trans, element (i, l) is a[l*lda + i], else a[i*lda + l].
  void (*pack_a)(const float* a, std::int64_t lda, bool trans, std::int64_t mc, std::int64_t kc,
                 float* dst);
  // C[0:mc, 0:nc] = alpha * op(A) * op(B) + (read_c ? beta * C : 0) over depth kc, from the
  // packed A block ap and op(B) at b_src (with b_trans, element (l, j) is b_src[j*ldb + l], else
  // b_src[l*ldb + j]); the macro-kernel packs B itself into bp (room for a [kc x nc] block), how
  // and when is the ISA's choice. With b_src null, bp already holds the block as pack_b leaves it
  // (b_trans is then ignored). With read_c false, C is only written.
  void (*macro)(std::int64_t mc, std::int64_t nc, std::int64_t kc, const float* ap, float* bp,
                const float* b_src, std::int64_t ldb, bool b_trans, float* c, std::int64_t ldc,
                float alpha, float beta, bool read_c);
  // Packs op(B)[0:kc, 0:nc] (b as for macro) into the layout macro reads from bp: ceil(nc/nr)
  // micro-panels, panel q at dst + q * nr * kc (Note [Prepacked B] in gemm_blocked.cpp).
  void (*pack_b)(const float* b, std::int64_t ldb, bool trans, std::int64_t kc, std::int64_t nc,
                 float* dst);
};

// Each returns its ISA's table. Call only after checking the CPU supports that ISA.
const IsaKernels* isa_kernels_avx512();
const IsaKernels* isa_kernels_avx2();

}  // namespace anvil::kernels::blocked
