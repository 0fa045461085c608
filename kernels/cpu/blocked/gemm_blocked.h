// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the `cpu.blocked` GEMM variant (our own packed, register-blocked f32 GEMM with
// AVX-512 or AVX2+FMA micro-kernels chosen at run time), plus hooks for tests and benchmarks,
// and BlockedPackedB: one right-hand operand packed once and multiplied many times.
#include <cstdint>
#include <memory>
#include <vector>

namespace anvil::kernels {

namespace blocked {
struct IsaKernels;
}  // namespace blocked

// op(B) [k, n] packed once into cpu.blocked's panel layout, then multiplied by many left-hand
// operands without packing it again (Note [Prepacked B] in gemm_blocked.cpp). The LSTM's
// per-step products with its recurrent weight use it (Note [Prepacked recurrent weight]).
class BlockedPackedB {
 public:
  // Packs op(B): with trans_b, element (l, j) of op(B) is b[j*ldb + l], else b[l*ldb + j].
  // Throws anvil::Error when the CPU has neither AVX-512F nor AVX2+FMA, or k or n < 1.
  BlockedPackedB(const float* b, std::int64_t ldb, bool trans_b, std::int64_t k, std::int64_t n);

  // C[m, n] (row stride ldc) = op(A) [m, k] @ op(B), plus C's old value when accumulate, on the
  // calling thread only (A is packed into a thread-local scratch buffer, so several threads may
  // multiply with one BlockedPackedB at once). With trans_a, element (i, l) of op(A) is
  // a[l*lda + i], else a[i*lda + l].
  void multiply(const float* a, std::int64_t lda, bool trans_a, std::int64_t m, float* c,
                std::int64_t ldc, bool accumulate) const;

  std::int64_t k() const { return k_; }
  std::int64_t n() const { return n_; }

 private:
  struct FreeDeleter {
    void operator()(float* p) const;
  };
  const float* block(std::int64_t kb, std::int64_t nb) const;

  const blocked::IsaKernels* isa_;
  std::int64_t k_, n_, kc_, nc_;
  std::int64_t k_blocks_, n_blocks_;
  std::vector<std::int64_t> offset_;  // float offset of block (kb, nb) at kb * n_blocks_ + nb
  std::unique_ptr<float[], FreeDeleter> packed_;
};

// Adds `cpu.blocked` to gemm_table(). Called once from register_builtin_kernels().
void register_gemm_blocked();

// The micro-kernel ISA cpu.blocked uses: "avx512", "avx2", or "none" when the CPU has neither
// (the variant then reports itself unsupported).
const char* gemm_blocked_isa();

// Tests and benchmarks: forces the micro-kernel ISA ("avx512" or "avx2"); "" or "auto" returns
// to the run-time choice. Throws anvil::Error for an unknown name or one this CPU cannot run.
void set_gemm_blocked_isa(const char* isa);

}  // namespace anvil::kernels
