// SPDX-License-Identifier: Apache-2.0
// The 16-bit GEMM variants of gemm_half.h. Row-major C[M,N] = alpha*op(A)*op(B) + beta*C with A,
// B and C all in the problem's dtype (bf16 or f16), every product and sum in f32, C rounded to
// nearest even once at the end. This file is baseline x86-64: packing, threading and the
// conversions; the vdpbf16ps loops live in gemm_bf16_avx512.cpp.
#include "kernels/cpu/bf16/gemm_half.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/half_types.h"
#include "engine/dispatch/gemm_problem.h"
#include "kernels/cpu/bf16/bf16_kernels.h"

namespace anvil::kernels {
namespace {

using i64 = std::int64_t;

std::atomic<bool> g_mask_native{false};

// __builtin_cpu_supports also checks that the OS saves the zmm registers (XCR0).
bool cpu_has_avx512bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

template <typename T>
struct AlignedFree {
  void operator()(T* p) const { std::free(p); }
};
template <typename T>
using Aligned = std::unique_ptr<T[], AlignedFree<T>>;

// 64-byte aligned storage for n elements of T (the B panels are read with aligned loads).
template <typename T>
Aligned<T> alloc_aligned(i64 n) {
  const auto bytes = static_cast<std::size_t>((std::max<i64>(n, 16) * sizeof(T) + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw std::bad_alloc();
  return Aligned<T>(static_cast<T*>(p));
}

// op(A)(i, l) and op(B)(l, j) as bf16 bit patterns.
std::uint16_t a_bits(const GemmProblem& p, const std::uint16_t* a, i64 i, i64 l) {
  return p.trans_a ? a[l * p.lda + i] : a[i * p.lda + l];
}
std::uint16_t b_bits(const GemmProblem& p, const std::uint16_t* b, i64 l, i64 j) {
  return p.trans_b ? b[j * p.ldb + l] : b[l * p.ldb + j];
}
std::uint32_t pair(std::uint16_t lo, std::uint16_t hi) {
  return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
}

// C = alpha * acc + beta * C, rounded to the storage type; C is not read when beta is zero.
template <typename Format>
void store_c(const GemmProblem& p, const float* acc, std::uint16_t* c, float alpha, float beta) {
  for (i64 i = 0; i < p.m; ++i)
    for (i64 j = 0; j < p.n; ++j) {
      std::uint16_t& out = c[i * p.ldc + j];
      float v = alpha * acc[i * p.n + j];
      if (!p.beta_zero) v += beta * Format::to_float(out);
      out = Format::from_float(v);
    }
}

// One matrix of cpu.bf16_avx512 (Note [bf16 pair packing]): pack, multiply rows in parallel,
// scale and round.
void bf16_native_matrix(const GemmProblem& p, const std::uint16_t* a, const std::uint16_t* b,
                        std::uint16_t* c, float alpha, float beta, int nt) {
  const i64 k2 = (p.k + 1) / 2;
  const i64 blocks = (p.n + 15) / 16;
  // Even number of column blocks: the kernel's 32-wide tile may read one block past the last.
  Aligned<std::uint32_t> bp = alloc_aligned<std::uint32_t>((blocks + 1) / 2 * 2 * k2 * 16);
  std::vector<std::uint32_t> ap(static_cast<std::size_t>(p.m * k2));
  std::vector<float> acc(static_cast<std::size_t>(p.m * p.n));
  std::uint32_t* bpp = bp.get();
  std::uint32_t* app = ap.data();
  const i64 bwords = (blocks + 1) / 2 * 2 * k2 * 16;
#pragma omp parallel num_threads(nt)
  {
#pragma omp for schedule(static) nowait
    for (i64 w = 0; w < bwords; ++w) {
      const i64 jj = w % 16, l = (w / 16) % k2, jb = w / (16 * k2);
      const i64 j = jb * 16 + jj;
      const std::uint16_t lo = j < p.n ? b_bits(p, b, 2 * l, j) : 0;
      const std::uint16_t hi = j < p.n && 2 * l + 1 < p.k ? b_bits(p, b, 2 * l + 1, j) : 0;
      bpp[w] = pair(lo, hi);
    }
#pragma omp for schedule(static)
    for (i64 i = 0; i < p.m; ++i)
      for (i64 l = 0; l < k2; ++l)
        app[i * k2 + l] =
            pair(a_bits(p, a, i, 2 * l), 2 * l + 1 < p.k ? a_bits(p, a, i, 2 * l + 1) : 0);
    // Rows in chunks of 8 (the kernel's tile height) split over the team.
    const i64 chunks = (p.m + 7) / 8;
#pragma omp for schedule(static)
    for (i64 q = 0; q < chunks; ++q) {
      const i64 r0 = q * 8, rows = std::min<i64>(8, p.m - r0);
      bf16::pairs_gemm_avx512bf16(app + r0 * k2, rows, k2, bpp, p.n, acc.data() + r0 * p.n, p.n);
    }
  }
  store_c<half_detail::BFloat16Format>(p, acc.data(), c, alpha, beta);
}

int thread_count(const GemmProblem& p) {
  const int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
  // Below ~2 MFLOP per thread, fork/join costs more than it saves (as in cpu.blocked).
  return static_cast<int>(std::max<double>(1, std::min<double>(nt, p.flops() / 2e6)));
}

void gemm_bf16_native(const GemmArgs& args) {
  const GemmProblem& p = args.problem;
  p.validate("gemm cpu.bf16_avx512");
  ANVIL_CHECK(p.dtype == DType::bf16, "gemm cpu.bf16_avx512", "expects bf16, got ",
              dtype_name(p.dtype));
  ANVIL_CHECK(gemm_bf16_native_available(), "gemm cpu.bf16_avx512",
              "this CPU lacks avx512_bf16 (or it is masked)");
  const int nt = thread_count(p);
  const auto* a = static_cast<const std::uint16_t*>(args.a);
  const auto* b = static_cast<const std::uint16_t*>(args.b);
  auto* c = static_cast<std::uint16_t*>(args.c);
  for (i64 bi = 0; bi < p.batch; ++bi)
    bf16_native_matrix(p, a + bi * p.stride_a, b + bi * p.stride_b, c + bi * p.stride_c,
                       static_cast<float>(args.alpha), static_cast<float>(args.beta), nt);
}

// Note [Half GEMM via f32]
// Where no 16-bit instruction is used, the operands are widened to dense f32 (exact: every bf16
// and f16 value is an f32), the f32 cpu.blocked variant computes C, and C is rounded back once.
// The numerics are then those of an f32 GEMM on the rounded inputs, the same contract as the
// native kernel (f32 products and sums), at the cost of the copies. The f32 copy of C carries C's
// old values only when beta != 0.
const GemmTable::Fn& blocked_f32_fn() {
  static const GemmTable::Fn fn = [] {
    for (const auto& v : gemm_table().variants())
      if (v.name == "cpu.blocked") return v.fn;
    throw Error("gemm cpu.*_via_f32: the f32 variant cpu.blocked is not registered");
  }();
  return fn;
}

template <typename Format>
void gemm_via_f32(const GemmArgs& args, DType expected, const char* where) {
  const GemmProblem& p = args.problem;
  p.validate(where);
  ANVIL_CHECK(p.dtype == expected, where, "expects ", dtype_name(expected), ", got ",
              dtype_name(p.dtype));
  const i64 ar = p.trans_a ? p.k : p.m, ac = p.trans_a ? p.m : p.k;  // A as stored
  const i64 br = p.trans_b ? p.n : p.k, bc = p.trans_b ? p.k : p.n;
  std::vector<float> af(static_cast<std::size_t>(ar * ac)), bf(static_cast<std::size_t>(br * bc));
  std::vector<float> cf(static_cast<std::size_t>(p.m * p.n));
  GemmProblem fp = GemmProblem::dense(p.m, p.n, p.k, p.trans_a, p.trans_b, DType::f32);
  // validate() wants leading dims >= 1 even where a dimension is 0 (K = 0: C = beta*C).
  fp.lda = std::max<i64>(fp.lda, 1);
  fp.ldb = std::max<i64>(fp.ldb, 1);
  fp.ldc = std::max<i64>(fp.ldc, 1);
  for (i64 bi = 0; bi < p.batch; ++bi) {
    const auto* a = static_cast<const std::uint16_t*>(args.a) + bi * p.stride_a;
    const auto* b = static_cast<const std::uint16_t*>(args.b) + bi * p.stride_b;
    auto* c = static_cast<std::uint16_t*>(args.c) + bi * p.stride_c;
    float* ad = af.data();
    float* bd = bf.data();
    for (i64 r = 0; r < ar; ++r)
      for (i64 s = 0; s < ac; ++s) ad[r * ac + s] = Format::to_float(a[r * p.lda + s]);
    for (i64 r = 0; r < br; ++r)
      for (i64 s = 0; s < bc; ++s) bd[r * bc + s] = Format::to_float(b[r * p.ldb + s]);
    GemmArgs fa{fp, af.data(), bf.data(), cf.data(), 1.0, 0.0};
    blocked_f32_fn()(fa);
    store_c<Format>(p, cf.data(), c, static_cast<float>(args.alpha), static_cast<float>(args.beta));
  }
}

Support supports_dtype(const GemmProblem& p, DType want, const char* name) {
  if (p.dtype != want)
    return Support::no(std::string(name) + " handles " + std::string(dtype_name(want)) +
                       " only, not " + std::string(dtype_name(p.dtype)));
  return Support::yes();
}

// Registers a Note [Half GEMM via f32] variant for one 16-bit dtype.
template <typename Format>
void add_via_f32(const char* name, DType dtype, const char* description) {
  const std::string where = std::string("gemm ") + name;
  gemm_table().add({
      .name = name,
      .supports = [name, dtype](const GemmProblem& p) { return supports_dtype(p, dtype, name); },
      .fn = [where, dtype](const GemmArgs& a) { gemm_via_f32<Format>(a, dtype, where.c_str()); },
      .description = description,
  });
}

}  // namespace

bool gemm_bf16_native_available() {
  static const bool has = cpu_has_avx512bf16();
  return has && !g_mask_native.load(std::memory_order_acquire);
}

void set_gemm_bf16_mask_native(bool mask) {
  g_mask_native.store(mask, std::memory_order_release);
  // The CPU feature is not part of the selection memo's key (Note [Selection memo]): a decision
  // made before the switch would otherwise be served after it.
  gemm_table().clear_autotune_cache();
}

void register_gemm_half() {
  gemm_table().add({
      .name = "cpu.bf16_avx512",
      .supports =
          [](const GemmProblem& p) {
            Support s = supports_dtype(p, DType::bf16, "cpu.bf16_avx512");
            if (s.ok && !gemm_bf16_native_available())
              return Support::no(
                  "cpu.bf16_avx512 needs avx512_bf16; this CPU lacks it or a "
                  "test masked it (cpu.bf16_via_f32 runs instead)");
            return s;
          },
      .fn = gemm_bf16_native,
      .description = "own bf16 GEMM, AVX-512 BF16 vdpbf16ps, f32 accumulation, OpenMP",
  });
  add_via_f32<half_detail::BFloat16Format>(
      "cpu.bf16_via_f32", DType::bf16, "bf16 fallback: widen to f32, cpu.blocked, round C to bf16");
  add_via_f32<half_detail::Float16Format>("cpu.f16_via_f32", DType::f16,
                                          "f16: widen to f32, cpu.blocked, round C to f16");
}

}  // namespace anvil::kernels
