// SPDX-License-Identifier: Apache-2.0
// GEMM `cpu.blocked`: our own f32 GEMM, GotoBLAS/BLIS style. Row-major C[M,N] =
// alpha*op(A)*op(B) + beta*C in all four transpose modes, any lda/ldb/ldc, batched.
// This file is the ISA-neutral driver (blocking loops, OpenMP, buffers, registration); the packing
// routines and micro-kernels live in gemm_blocked_avx512.cpp (14x32 tile) and
// gemm_blocked_avx2.cpp (6x16 tile), picked at run time from the CPU's features.
#include "kernels/cpu/blocked/gemm_blocked.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>

#include "engine/core/error.h"
#include "engine/dispatch/gemm_problem.h"
#include "kernels/cpu/blocked/blocked_kernels.h"
#include "kernels/cpu/thread_scratch.h"

namespace anvil::kernels {
namespace {

using blocked::IsaKernels;
using i64 = std::int64_t;

// __builtin_cpu_supports also checks that the OS saves the wide registers (XCR0).
bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("fma");
}
bool cpu_has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

const IsaKernels* detected_kernels() {
  static const IsaKernels* const k = cpu_has_avx512() ? blocked::isa_kernels_avx512()
                                     : cpu_has_avx2() ? blocked::isa_kernels_avx2()
                                                      : nullptr;
  return k;
}

std::atomic<const IsaKernels*> g_forced{nullptr};

const IsaKernels* active_kernels() {
  const IsaKernels* f = g_forced.load(std::memory_order_acquire);
  return f ? f : detected_kernels();
}

i64 ceil_div(i64 a, i64 b) { return (a + b - 1) / b; }
i64 round_up(i64 a, i64 b) { return ceil_div(a, b) * b; }

// The block size for covering n in blocks of at most `cap` (rounded up to `unit`), evened out so
// that the last block is not a sliver: K = 400 with KC = 384 gives 2 x 200, not 384 + 16 (a thin
// last K block would pay a full C read/write for little work).
i64 balanced_block(i64 n, i64 cap, i64 unit) {
  const i64 blocks = ceil_div(n, cap);
  return std::min(round_up(ceil_div(n, blocks), unit), round_up(cap, unit));
}

// [begin, end) of part `i` out of `parts` near-equal parts of `n` units.
void split(i64 n, int parts, int i, i64& begin, i64& end) {
  const i64 q = n / parts, r = n % parts;
  begin = i * q + std::min<i64>(i, r);
  end = begin + q + (i < r ? 1 : 0);
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using FloatBuffer = std::unique_ptr<float[], FreeDeleter>;

FloatBuffer alloc_floats(i64 n) {
  const std::size_t bytes = static_cast<std::size_t>(round_up(std::max<i64>(n, 16) * 4, 64));
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw std::bad_alloc();
  return FloatBuffer(static_cast<float*>(p));
}

// Note [Threading]
// One parallel region per call, not per loop: inside it every thread walks the same (ic, pc)
// loop. The A block of each step is packed by all threads together (each its share of
// micro-panels) into one of two shared buffers, then one barrier; double-buffering A means the
// next step's packing cannot overwrite a block someone still multiplies, so one barrier per step
// suffices. The C block is split over a tn x tm grid of threads, preferring columns (tn): each
// thread packs its own B blocks into its own buffer, which stays in its core's private L2, and
// owns a fixed C sub-block across all K steps (no races, no reduction). Rows are split only
// when N is too narrow to give every thread a balanced share (then B blocks are packed
// redundantly, which is cheap exactly when N is small). Small problems run on the calling
// thread: below ~2 MFLOP per thread, fork/join costs more than it saves. Batches of small
// matrices run one matrix per thread instead.
constexpr double kMinFlopsPerThread = 2e6;
constexpr double kSmallMatrixFlops = 32e6;

struct Plan {
  const IsaKernels* isa;
  const GemmProblem* p;
  const float* a;
  const float* b;
  float* c;
  float alpha, beta;
  i64 mc, kc, nc;  // block sizes (mc multiple of mr, nc of nr)
  i64 a_floats;    // one packed A block
  i64 b_floats;    // one packed B block
};

// op(A)(i, l) and op(B)(l, j) addresses.
const float* a_at(const GemmProblem& p, const float* a, i64 i, i64 l) {
  return p.trans_a ? a + l * p.lda + i : a + i * p.lda + l;
}
const float* b_at(const GemmProblem& p, const float* b, i64 l, i64 j) {
  return p.trans_b ? b + j * p.ldb + l : b + l * p.ldb + j;
}

// Thread `tid` of `nt` (arranged tn x tm) computes matrix `bi`. `abuf` holds two A blocks shared
// by the team, `bbuf` is this thread's B block. `step` counts A blocks to alternate the buffers.
void run_matrix(const Plan& pl, i64 bi, int tid, int nt, int tn, float* abuf, float* bbuf,
                i64& step) {
  const GemmProblem& p = *pl.p;
  const IsaKernels& K = *pl.isa;
  const float* A = pl.a + bi * p.stride_a;
  const float* B = pl.b + bi * p.stride_b;
  float* C = pl.c + bi * p.stride_c;
  const i64 mr = K.mr, nr = K.nr;
  const int tm = nt / tn;
  const int t_n = tid % tn, t_m = tid / tn;

  i64 n0, n1;  // this thread's columns, whole nr-wide panels
  split(ceil_div(p.n, nr), tn, t_n, n0, n1);
  n0 *= nr;
  n1 = std::min(n1 * nr, p.n);

  for (i64 ic = 0; ic < p.m; ic += pl.mc) {
    const i64 mcur = std::min(pl.mc, p.m - ic);
    const i64 panels = ceil_div(mcur, mr);
    for (i64 pc = 0; pc < p.k; pc += pl.kc) {
      const i64 kcur = std::min(pl.kc, p.k - pc);
      float* ablk = abuf + (step++ & 1) * pl.a_floats;
      // Pack this thread's share of the A block's micro-panels.
      i64 q0, q1;
      split(panels, nt, tid, q0, q1);
      if (q0 < q1)
        K.pack_a(a_at(p, A, ic + q0 * mr, pc), p.lda, p.trans_a, std::min(mcur, q1 * mr) - q0 * mr,
                 kcur, ablk + q0 * mr * kcur);
      if (nt > 1) {
#pragma omp barrier
      }
      // After the first K step C holds a partial sum: accumulate (beta = 1) from then on.
      const bool read_c = pc > 0 || !p.beta_zero;
      const float beta = pc > 0 ? 1.0f : pl.beta;
      i64 r0, r1;  // this thread's rows of the block, whole mr-high panels
      split(panels, tm, t_m, r0, r1);
      r0 *= mr;
      r1 = std::min(r1 * mr, mcur);
      if (r0 >= r1) continue;
      for (i64 jc = n0; jc < n1; jc += pl.nc) {
        const i64 ncur = std::min(pl.nc, n1 - jc);
        // The macro-kernel packs the B block itself (Note [Fused packing of B]).
        K.macro(r1 - r0, ncur, kcur, ablk + r0 * kcur, bbuf, b_at(p, B, pc, jc), p.ldb, p.trans_b,
                C + (ic + r0) * p.ldc + jc, p.ldc, pl.alpha, beta, read_c);
      }
    }
  }
}

// K == 0: C = beta * C (or 0), as ref does.
void scale_c(const GemmProblem& p, float* c, float beta) {
  for (i64 bi = 0; bi < p.batch; ++bi)
    for (i64 i = 0; i < p.m; ++i) {
      float* row = c + bi * p.stride_c + i * p.ldc;
      for (i64 j = 0; j < p.n; ++j) row[j] = p.beta_zero ? 0.0f : beta * row[j];
    }
}

// Splits nt threads into tn (over N) x tm (over M), preferring tn; balance is measured in
// micro-panels of the first M block.
int choose_tn(i64 n_panels, i64 m_panels, int nt) {
  int best_tn = nt;
  double best = -1;
  for (int tn = nt; tn >= 1; --tn) {
    if (nt % tn) continue;
    const int tm = nt / tn;
    const double en = static_cast<double>(n_panels) / (tn * ceil_div(n_panels, tn));
    const double em = static_cast<double>(m_panels) / (tm * ceil_div(m_panels, tm));
    if (en * em > best + 1e-9) {
      best = en * em;
      best_tn = tn;
    }
  }
  return best_tn;
}

void gemm_blocked_f32(const GemmArgs& args) {
  const GemmProblem& p = args.problem;
  p.validate("gemm cpu.blocked");
  const IsaKernels* isa = active_kernels();
  ANVIL_CHECK(isa != nullptr, "gemm cpu.blocked", "this CPU has neither AVX-512F nor AVX2+FMA");
  if (p.m == 0 || p.n == 0) return;
  float* c = static_cast<float*>(args.c);
  if (p.k == 0) {
    scale_c(p, c, static_cast<float>(args.beta));
    return;
  }

  Plan pl;
  pl.isa = isa;
  pl.p = &p;
  pl.a = static_cast<const float*>(args.a);
  pl.b = static_cast<const float*>(args.b);
  pl.c = c;
  pl.alpha = static_cast<float>(args.alpha);
  pl.beta = static_cast<float>(args.beta);
  pl.kc = balanced_block(p.k, isa->kc, 1);
  pl.mc = balanced_block(p.m, isa->mc, isa->mr);
  pl.nc = round_up(isa->nc, isa->nr);
  pl.a_floats = round_up(round_up(pl.mc, isa->mr) * pl.kc, 16);
  pl.b_floats = round_up(round_up(std::min(pl.nc, round_up(p.n, isa->nr)), isa->nr) * pl.kc, 16);

  const double flops = 2.0 * static_cast<double>(p.m) * p.n * p.k;  // one matrix
  int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
  nt = static_cast<int>(
      std::max<double>(1, std::min<double>(nt, flops * p.batch / kMinFlopsPerThread)));

  if (nt == 1) {
    FloatBuffer abuf = alloc_floats(2 * pl.a_floats), bbuf = alloc_floats(pl.b_floats);
    i64 step = 0;
    for (i64 bi = 0; bi < p.batch; ++bi) run_matrix(pl, bi, 0, 1, 1, abuf.get(), bbuf.get(), step);
    return;
  }

  if (p.batch >= nt && flops < kSmallMatrixFlops) {
    // Many small matrices: one matrix per thread at a time, no barriers.
    const int threads = static_cast<int>(std::min<i64>(nt, p.batch));
    FloatBuffer abuf = alloc_floats(threads * 2 * pl.a_floats);
    FloatBuffer bbuf = alloc_floats(threads * pl.b_floats);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (i64 bi = 0; bi < p.batch; ++bi) {
      const int t = omp_get_thread_num();
      i64 step = 0;
      run_matrix(pl, bi, 0, 1, 1, abuf.get() + t * 2 * pl.a_floats, bbuf.get() + t * pl.b_floats,
                 step);
    }
    return;
  }

  const int tn = choose_tn(ceil_div(p.n, isa->nr), ceil_div(pl.mc, isa->mr), nt);
  FloatBuffer abuf = alloc_floats(2 * pl.a_floats);
  FloatBuffer bbuf = alloc_floats(nt * pl.b_floats);
#pragma omp parallel num_threads(nt)
  {
    // A team can come out smaller than asked for (nested regions, thread limits).
    const int team = omp_get_num_threads();
    const int tid = omp_get_thread_num();
    const int team_tn = team == nt ? tn : team;
    i64 step = 0;
    for (i64 bi = 0; bi < p.batch; ++bi)
      run_matrix(pl, bi, tid, team, team_tn, abuf.get(), bbuf.get() + tid * pl.b_floats, step);
  }
}

}  // namespace

// Note [Prepacked B]
// gemm_blocked_f32 packs every [KC x NC] block of op(B) when it reaches it: for one large GEMM
// that is a small share of the work, but a product repeated many times with the same right-hand
// operand (an LSTM's h_{t-1} @ W_hh^T, T times per layer call, Note [Prepacked recurrent
// weight]) packs the same bytes again every time, and the per-step products are small (M = 64
// to 128 rows, so each packed element of B feeds only M / MR tiles; Note [Fused packing of B]
// measured packing at a quarter to a third of the run time at M = 64). BlockedPackedB packs all
// of op(B) once, block by block in the layout the macro-kernel reads (IsaKernels::pack_b), and
// multiply() runs the same (ic, pc, jc) loop as run_matrix on one thread with the macro-kernel
// told that its B block is already packed (b_src null). The blocks use the same KC / NC as a
// normal call, so the micro-kernels see exactly the problems they are tuned for. multiply()
// packs A into a thread-local ScratchBuffer: no allocation after the first call of a thread.
void BlockedPackedB::FreeDeleter::operator()(float* p) const { std::free(p); }

BlockedPackedB::BlockedPackedB(const float* b, i64 ldb, bool trans_b, i64 k, i64 n)
    : isa_(active_kernels()), k_(k), n_(n) {
  ANVIL_CHECK(isa_ != nullptr, "BlockedPackedB", "this CPU has neither AVX-512F nor AVX2+FMA");
  ANVIL_CHECK(k >= 1 && n >= 1, "BlockedPackedB", "op(B) must be at least 1 x 1, got ", k, " x ",
              n);
  ANVIL_CHECK(ldb >= (trans_b ? k : n), "BlockedPackedB", "ldb ", ldb, " is less than ",
              trans_b ? "k " : "n ", trans_b ? k : n);
  kc_ = balanced_block(k, isa_->kc, 1);
  nc_ = round_up(isa_->nc, isa_->nr);
  k_blocks_ = ceil_div(k, kc_);
  n_blocks_ = ceil_div(n, nc_);
  offset_.resize(static_cast<std::size_t>(k_blocks_ * n_blocks_) + 1);
  i64 total = 0;
  for (i64 kb = 0; kb < k_blocks_; ++kb)
    for (i64 nb = 0; nb < n_blocks_; ++nb) {
      offset_[static_cast<std::size_t>(kb * n_blocks_ + nb)] = total;
      const i64 kcur = std::min(kc_, k - kb * kc_);
      const i64 ncur = std::min(nc_, n - nb * nc_);
      total += round_up(round_up(ncur, isa_->nr) * kcur, 16);  // blocks stay 64-byte aligned
    }
  offset_.back() = total;
  packed_.reset(alloc_floats(total).release());
  for (i64 kb = 0; kb < k_blocks_; ++kb)
    for (i64 nb = 0; nb < n_blocks_; ++nb) {
      const i64 pc = kb * kc_, jc = nb * nc_;
      const float* src = trans_b ? b + jc * ldb + pc : b + pc * ldb + jc;
      isa_->pack_b(src, ldb, trans_b, std::min(kc_, k - pc), std::min(nc_, n - jc),
                   packed_.get() + offset_[static_cast<std::size_t>(kb * n_blocks_ + nb)]);
    }
}

const float* BlockedPackedB::block(i64 kb, i64 nb) const {
  return packed_.get() + offset_[static_cast<std::size_t>(kb * n_blocks_ + nb)];
}

void BlockedPackedB::multiply(const float* a, i64 lda, bool trans_a, i64 m, float* c, i64 ldc,
                              bool accumulate) const {
  if (m <= 0) return;
  const IsaKernels& K = *isa_;
  const i64 mc = balanced_block(m, K.mc, K.mr);
  thread_local ScratchBuffer a_scratch;
  auto* ablk = static_cast<float*>(a_scratch.get(
      static_cast<std::size_t>(round_up(mc, K.mr) * kc_) * sizeof(float), "BlockedPackedB"));
  for (i64 ic = 0; ic < m; ic += mc) {
    const i64 mcur = std::min(mc, m - ic);
    for (i64 kb = 0; kb < k_blocks_; ++kb) {
      const i64 pc = kb * kc_, kcur = std::min(kc_, k_ - pc);
      K.pack_a(trans_a ? a + pc * lda + ic : a + ic * lda + pc, lda, trans_a, mcur, kcur, ablk);
      const bool read_c = kb > 0 || accumulate;  // later K blocks add to the partial sum
      for (i64 nb = 0; nb < n_blocks_; ++nb) {
        const i64 jc = nb * nc_;
        // The macro-kernel only reads a prepacked block (b_src null); the cast is its signature.
        K.macro(mcur, std::min(nc_, n_ - jc), kcur, ablk, const_cast<float*>(block(kb, nb)),
                nullptr, 0, false, c + ic * ldc + jc, ldc, 1.0f, 1.0f, read_c);
      }
    }
  }
}

const char* gemm_blocked_isa() {
  const IsaKernels* k = active_kernels();
  return k ? k->isa : "none";
}

void set_gemm_blocked_isa(const char* isa) {
  const std::string name = isa ? isa : "";
  const IsaKernels* k = nullptr;
  if (name == "avx512") {
    ANVIL_CHECK(cpu_has_avx512(), "set_gemm_blocked_isa", "this CPU lacks AVX-512F/DQ/BW/VL");
    k = blocked::isa_kernels_avx512();
  } else if (name == "avx2") {
    ANVIL_CHECK(cpu_has_avx2(), "set_gemm_blocked_isa", "this CPU lacks AVX2+FMA");
    k = blocked::isa_kernels_avx2();
  } else {
    ANVIL_CHECK(name.empty() || name == "auto", "set_gemm_blocked_isa", "unknown ISA '", name,
                "' (expected avx512, avx2 or auto)");
  }
  g_forced.store(k, std::memory_order_release);
}

void register_gemm_blocked() {
  gemm_table().add({
      .name = "cpu.blocked",
      .supports =
          [](const GemmProblem& p) {
            if (p.dtype != DType::f32)
              return Support::no(std::string("cpu.blocked handles f32 only, not ") +
                                 std::string(dtype_name(p.dtype)));
            if (!active_kernels())
              return Support::no("cpu.blocked needs AVX-512F or AVX2+FMA; this CPU has neither");
            return Support::yes();
          },
      .fn = gemm_blocked_f32,
      .description = std::string("own packed GEMM, ") +
                     (detected_kernels() ? detected_kernels()->isa : "no usable ISA") +
                     " micro-kernel, OpenMP",
  });
}

}  // namespace anvil::kernels
