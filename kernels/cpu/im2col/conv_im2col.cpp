// SPDX-License-Identifier: Apache-2.0
// conv2d `cpu.im2col`: all three passes as GEMMs over an im2col matrix, f32 and f64, every
// stride/padding/dilation/groups, bias and fused relu. The GEMMs go through gemm_table(), so
// whichever GEMM variant the gemm table selects (its heuristic, forcing, autotune) runs below.
// NCHW x/y, KCRS w; the column matrix is [C*R*S, columns] row-major, group g owning rows
// [g*Cg*R*S, (g+1)*Cg*R*S) (Note [im2col chunking]).
#include "kernels/cpu/im2col/conv_im2col.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/core/error.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/gemm_call.h"
#include "kernels/cpu/conv_passes.h"
#include "kernels/cpu/thread_scratch.h"

namespace anvil::kernels {
namespace {

using i64 = std::int64_t;

// Note [im2col chunking]
// A full im2col matrix is C*R*S*P*Q elements per sample (115 MB for VGG16's 64->64 3x3 layer at
// 224x224), so the batch is never expanded at once. Work goes in chunks whose column matrix
// stays under kColBudgetBytes:
//  * "direct" chunks (one sample, output rows [p0, p1)), used when P*Q >= kWideMinColumns or
//    N == 1: the GEMMs read dy / write y in place (ld = P*Q), with no gather or scatter. The
//    GEMM's column count (p1 - p0) * Q is large enough to run near peak. A 1x1 stride-1
//    unpadded convolution skips im2col altogether (x is its own column matrix).
//  * "wide" chunks (nb whole samples side by side: columns i*P*Q + p*Q + q), used when P*Q is
//    small (late ResNet layers: 7x7 = 49 columns per sample): one GEMM with nb*P*Q columns
//    instead of nb skinny ones. y is scattered from a [K, nb*P*Q] buffer (bias and relu folded
//    into the scatter), and dy gathered into one for the backward passes.
// backward_weights accumulates dW over chunks with beta = 1 (beta = 0 for the first chunk).
constexpr std::size_t kColBudgetBytes = std::size_t{16} << 20;
constexpr i64 kWideMinColumns = 1024;

// This thread's growable 64-byte-aligned buffer number `slot` (two per thread: the column
// matrix and the gather/scatter buffer). Reused across calls: a fresh 16 MB allocation per call
// would pay thousands of page faults each time.
void* scratch(int slot, std::size_t bytes) {
  thread_local ScratchBuffer bufs[2];
  return bufs[slot].get(bytes, "conv2d cpu.im2col");
}

// Output columns q in [lo, hi) read input columns q*sw + iw0 inside [0, W).
inline void valid_range(i64 iw0, i64 sw, i64 W, i64 Q, i64& lo, i64& hi) {
  lo = iw0 >= 0 ? 0 : (-iw0 + sw - 1) / sw;
  hi = W - iw0 <= 0 ? 0 : (W - iw0 + sw - 1) / sw;
  lo = std::min(lo, Q);
  hi = std::clamp(hi, lo, Q);
}

struct Geometry {
  i64 N, C, H, W, K, R, S, P, Q, Cg, Kg, RS, CRS, CgRS;
  explicit Geometry(const ConvProblem& p)
      : N(p.n),
        C(p.c),
        H(p.h),
        W(p.w),
        K(p.k),
        R(p.r),
        S(p.s),
        P(p.p()),
        Q(p.q()),
        Cg(p.c_per_group()),
        Kg(p.k_per_group()),
        RS(p.r * p.s),
        CRS(p.c * p.r * p.s),
        CgRS(p.c_per_group() * p.r * p.s) {}
};

// One row (c, r, s) of the column matrix for output rows [p0, p1) of one sample xn [C, H, W]:
// col_row[(p - p0) * Q + q] = x[c, p*sh - ph + r*dh, q*sw - pw + s*dw] (0 outside).
template <typename T>
void im2col_row(const ConvProblem& pr, const Geometry& g, const T* xn, i64 row, i64 p0, i64 p1,
                T* col_row) {
  const i64 c = row / g.RS, r = (row / g.S) % g.R, s = row % g.S;
  const T* xc = xn + c * g.H * g.W;
  const i64 iw0 = s * pr.dil_w - pr.pad_w;
  i64 lo, hi;
  valid_range(iw0, pr.stride_w, g.W, g.Q, lo, hi);
  for (i64 p = p0; p < p1; ++p) {
    T* d = col_row + (p - p0) * g.Q;
    const i64 ih = p * pr.stride_h - pr.pad_h + r * pr.dil_h;
    if (ih < 0 || ih >= g.H) {
      std::fill(d, d + g.Q, T(0));
      continue;
    }
    const T* src = xc + ih * g.W + iw0;
    std::fill(d, d + lo, T(0));
    if (pr.stride_w == 1) {
      std::memcpy(d + lo, src + lo, static_cast<std::size_t>(hi - lo) * sizeof(T));
    } else {
      for (i64 q = lo; q < hi; ++q) d[q] = src[q * pr.stride_w];
    }
    std::fill(d + hi, d + g.Q, T(0));
  }
}

// Adds the rows (c, *, *) of a column matrix (output rows [p0, p1)) back into channel c of
// dxn [C, H, W]; one channel per call, so channels can run in parallel without races.
template <typename T>
void col2im_channel(const ConvProblem& pr, const Geometry& g, const T* col, i64 ld, i64 c, i64 p0,
                    i64 p1, T* dxn) {
  T* dxc = dxn + c * g.H * g.W;
  for (i64 r = 0; r < g.R; ++r)
    for (i64 s = 0; s < g.S; ++s) {
      const T* src_row = col + ((c * g.R + r) * g.S + s) * ld;
      const i64 iw0 = s * pr.dil_w - pr.pad_w;
      i64 lo, hi;
      valid_range(iw0, pr.stride_w, g.W, g.Q, lo, hi);
      for (i64 p = p0; p < p1; ++p) {
        const i64 ih = p * pr.stride_h - pr.pad_h + r * pr.dil_h;
        if (ih < 0 || ih >= g.H) continue;
        T* d = dxc + ih * g.W + iw0;
        const T* sr = src_row + (p - p0) * g.Q;
        if (pr.stride_w == 1) {
          for (i64 q = lo; q < hi; ++q) d[q] += sr[q];
        } else {
          for (i64 q = lo; q < hi; ++q) d[q * pr.stride_w] += sr[q];
        }
      }
    }
}

// C[M, N] (+)= op(A) op(B) through the gemm table; pointers in elements of T.
template <typename T>
void gemm(bool ta, bool tb, i64 m, i64 n, i64 k, const T* a, i64 lda, const T* b, i64 ldb, T* c,
          i64 ldc, bool accumulate) {
  GemmArgs args;
  GemmProblem& p = args.problem;
  p.dtype = DTypeOf<T>::value;
  p.trans_a = ta;
  p.trans_b = tb;
  p.m = m;
  p.n = n;
  p.k = k;
  p.lda = lda;
  p.ldb = ldb;
  p.ldc = ldc;
  p.beta_zero = !accumulate;
  args.a = a;
  args.b = b;
  args.c = c;
  args.beta = accumulate ? 1.0 : 0.0;
  run_gemm(args);  // Note [GEMM through the table]: trials never disturb an accumulated C
}

// The chunk plan (Note [im2col chunking]).
struct Plan {
  bool wide = false;
  i64 nb = 1;    // samples per chunk (wide)
  i64 rows = 0;  // output rows per chunk (direct)
};

Plan make_plan(const ConvProblem& pr, const Geometry& g, std::size_t elem) {
  Plan plan;
  const auto budget = static_cast<i64>(kColBudgetBytes / elem);
  const i64 PQ = g.P * g.Q;
  if (g.N > 1 && PQ < kWideMinColumns) {
    plan.wide = true;
    plan.nb = std::clamp<i64>(budget / std::max<i64>(g.CRS * PQ, 1), 1, g.N);
    plan.rows = g.P;
  } else {
    plan.rows =
        pr.is_pointwise() ? g.P : std::clamp<i64>(budget / std::max<i64>(g.CRS * g.Q, 1), 1, g.P);
  }
  return plan;
}

// ---- forward -------------------------------------------------------------------------------

template <typename T>
void forward(const ConvArgs& a) {
  const ConvProblem& pr = a.problem;
  const Geometry g(pr);
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  const T* b = pr.has_bias ? static_cast<const T*>(a.b) : nullptr;
  T* y = static_cast<T*>(a.y);
  const bool relu = pr.fuse_relu;
  const i64 PQ = g.P * g.Q, HW = g.H * g.W;
  const Plan plan = make_plan(pr, g, sizeof(T));

  if (plan.wide) {
    const i64 ld = plan.nb * PQ;  // columns of the chunk
    T* col = static_cast<T*>(scratch(0, sizeof(T) * g.CRS * ld));
    T* out = static_cast<T*>(scratch(1, sizeof(T) * g.K * ld));  // [K, nb*P*Q]
    for (i64 n0 = 0; n0 < g.N; n0 += plan.nb) {
      const i64 nb = std::min(plan.nb, g.N - n0), cols = nb * PQ;
#pragma omp parallel for collapse(2) schedule(static)
      for (i64 i = 0; i < nb; ++i)
        for (i64 row = 0; row < g.CRS; ++row)
          im2col_row(pr, g, x + (n0 + i) * g.C * HW, row, 0, g.P, col + row * cols + i * PQ);
      for (i64 gi = 0; gi < pr.groups; ++gi)
        gemm<T>(false, false, g.Kg, cols, g.CgRS, w + gi * g.Kg * g.CgRS, g.CgRS,
                col + gi * g.CgRS * cols, cols, out + gi * g.Kg * cols, cols, false);
#pragma omp parallel for collapse(2) schedule(static)
      for (i64 i = 0; i < nb; ++i)
        for (i64 k = 0; k < g.K; ++k) {
          const T* src = out + k * cols + i * PQ;
          T* dst = y + ((n0 + i) * g.K + k) * PQ;
          const T bk = b ? b[k] : T(0);
          for (i64 j = 0; j < PQ; ++j) {
            T v = src[j] + bk;
            dst[j] = relu && v <= T(0) ? T(0) : v;  // NaN stays
          }
        }
    }
    return;
  }

  T* colbuf = pr.is_pointwise() ? nullptr
                                : static_cast<T*>(scratch(0, sizeof(T) * g.CRS * plan.rows * g.Q));
  for (i64 n = 0; n < g.N; ++n) {
    const T* xn = x + n * g.C * HW;
    T* yn = y + n * g.K * PQ;
    for (i64 p0 = 0; p0 < g.P; p0 += plan.rows) {
      const i64 p1 = std::min(g.P, p0 + plan.rows), cols = (p1 - p0) * g.Q;
      const T* col;
      i64 ldcol;
      if (!colbuf) {  // 1x1 stride 1 unpadded: x[C, H*W] is the column matrix
        col = xn + p0 * g.Q;
        ldcol = HW;
      } else {
#pragma omp parallel for schedule(static)
        for (i64 row = 0; row < g.CRS; ++row)
          im2col_row(pr, g, xn, row, p0, p1, colbuf + row * cols);
        col = colbuf;
        ldcol = cols;
      }
      for (i64 gi = 0; gi < pr.groups; ++gi)
        gemm<T>(false, false, g.Kg, cols, g.CgRS, w + gi * g.Kg * g.CgRS, g.CgRS,
                col + gi * g.CgRS * ldcol, ldcol, yn + gi * g.Kg * PQ + p0 * g.Q, PQ, false);
      if (b || relu) {
#pragma omp parallel for schedule(static)
        for (i64 k = 0; k < g.K; ++k) {
          T* d = yn + k * PQ + p0 * g.Q;
          const T bk = b ? b[k] : T(0);
          for (i64 j = 0; j < cols; ++j) {
            T v = d[j] + bk;
            d[j] = relu && v <= T(0) ? T(0) : v;  // NaN stays
          }
        }
      }
    }
  }
}

// ---- backward data: dcol = W^T dy (per group), then col2im ------------------------------------

template <typename T>
void backward_data(const ConvArgs& a) {
  const ConvProblem& pr = a.problem;
  const Geometry g(pr);
  const T* dy = static_cast<const T*>(a.dy);
  const T* w = static_cast<const T*>(a.w);
  T* dx = static_cast<T*>(a.dx);
  const i64 PQ = g.P * g.Q, HW = g.H * g.W;
  const Plan plan = make_plan(pr, g, sizeof(T));

  if (plan.wide) {
    const i64 ld = plan.nb * PQ;
    T* col = static_cast<T*>(scratch(0, sizeof(T) * g.CRS * ld));
    T* dyt = static_cast<T*>(scratch(1, sizeof(T) * g.K * ld));  // [K, nb*P*Q]
    for (i64 n0 = 0; n0 < g.N; n0 += plan.nb) {
      const i64 nb = std::min(plan.nb, g.N - n0), cols = nb * PQ;
#pragma omp parallel for collapse(2) schedule(static)
      for (i64 i = 0; i < nb; ++i)
        for (i64 k = 0; k < g.K; ++k)
          std::memcpy(dyt + k * cols + i * PQ, dy + ((n0 + i) * g.K + k) * PQ,
                      static_cast<std::size_t>(PQ) * sizeof(T));
      for (i64 gi = 0; gi < pr.groups; ++gi)
        gemm<T>(true, false, g.CgRS, cols, g.Kg, w + gi * g.Kg * g.CgRS, g.CgRS,
                dyt + gi * g.Kg * cols, cols, col + gi * g.CgRS * cols, cols, false);
#pragma omp parallel for collapse(2) schedule(static)
      for (i64 i = 0; i < nb; ++i)
        for (i64 c = 0; c < g.C; ++c) {
          T* dxn = dx + (n0 + i) * g.C * HW;
          std::fill(dxn + c * HW, dxn + (c + 1) * HW, T(0));
          col2im_channel(pr, g, col + i * PQ, cols, c, 0, g.P, dxn);
        }
    }
    return;
  }

  const bool direct = pr.is_pointwise();  // dx[C, H*W] is the column matrix itself
  T* colbuf = direct ? nullptr : static_cast<T*>(scratch(0, sizeof(T) * g.CRS * plan.rows * g.Q));
  for (i64 n = 0; n < g.N; ++n) {
    const T* dyn = dy + n * g.K * PQ;
    T* dxn = dx + n * g.C * HW;
    if (!direct) std::memset(dxn, 0, sizeof(T) * static_cast<std::size_t>(g.C * HW));
    for (i64 p0 = 0; p0 < g.P; p0 += plan.rows) {
      const i64 p1 = std::min(g.P, p0 + plan.rows), cols = (p1 - p0) * g.Q;
      T* col = direct ? dxn + p0 * g.Q : colbuf;
      const i64 ldcol = direct ? HW : cols;
      for (i64 gi = 0; gi < pr.groups; ++gi)
        gemm<T>(true, false, g.CgRS, cols, g.Kg, w + gi * g.Kg * g.CgRS, g.CgRS,
                dyn + gi * g.Kg * PQ + p0 * g.Q, PQ, col + gi * g.CgRS * ldcol, ldcol, false);
      if (!direct) {
#pragma omp parallel for schedule(static)
        for (i64 c = 0; c < g.C; ++c) col2im_channel(pr, g, colbuf, cols, c, p0, p1, dxn);
      }
    }
  }
}

// ---- backward weights: dW += dy col^T per chunk (and db = sum dy) ------------------------------

template <typename T>
void backward_weights(const ConvArgs& a) {
  const ConvProblem& pr = a.problem;
  const Geometry g(pr);
  const T* x = static_cast<const T*>(a.x);
  const T* dy = static_cast<const T*>(a.dy);
  T* dw = static_cast<T*>(a.dw);
  const i64 PQ = g.P * g.Q, HW = g.H * g.W;
  const Plan plan = make_plan(pr, g, sizeof(T));

  if (pr.has_bias) {
    T* db = static_cast<T*>(a.db);
#pragma omp parallel for schedule(static)
    for (i64 k = 0; k < g.K; ++k) {
      double acc = 0.0;
      for (i64 n = 0; n < g.N; ++n) {
        const T* d = dy + (n * g.K + k) * PQ;
        T part = T(0);
        for (i64 j = 0; j < PQ; ++j) part += d[j];
        acc += static_cast<double>(part);
      }
      db[k] = static_cast<T>(acc);
    }
  }

  bool first = true;
  if (plan.wide) {
    const i64 ld = plan.nb * PQ;
    T* col = static_cast<T*>(scratch(0, sizeof(T) * g.CRS * ld));
    T* dyt = static_cast<T*>(scratch(1, sizeof(T) * g.K * ld));
    for (i64 n0 = 0; n0 < g.N; n0 += plan.nb) {
      const i64 nb = std::min(plan.nb, g.N - n0), cols = nb * PQ;
#pragma omp parallel for collapse(2) schedule(static)
      for (i64 i = 0; i < nb; ++i)
        for (i64 row = 0; row < g.CRS + g.K; ++row) {
          if (row < g.CRS)
            im2col_row(pr, g, x + (n0 + i) * g.C * HW, row, 0, g.P, col + row * cols + i * PQ);
          else
            std::memcpy(dyt + (row - g.CRS) * cols + i * PQ,
                        dy + ((n0 + i) * g.K + row - g.CRS) * PQ,
                        static_cast<std::size_t>(PQ) * sizeof(T));
        }
      for (i64 gi = 0; gi < pr.groups; ++gi)
        gemm<T>(false, true, g.Kg, g.CgRS, cols, dyt + gi * g.Kg * cols, cols,
                col + gi * g.CgRS * cols, cols, dw + gi * g.Kg * g.CgRS, g.CgRS, !first);
      first = false;
    }
    return;
  }

  T* colbuf = pr.is_pointwise() ? nullptr
                                : static_cast<T*>(scratch(0, sizeof(T) * g.CRS * plan.rows * g.Q));
  for (i64 n = 0; n < g.N; ++n) {
    const T* xn = x + n * g.C * HW;
    const T* dyn = dy + n * g.K * PQ;
    for (i64 p0 = 0; p0 < g.P; p0 += plan.rows) {
      const i64 p1 = std::min(g.P, p0 + plan.rows), cols = (p1 - p0) * g.Q;
      const T* col;
      i64 ldcol;
      if (!colbuf) {
        col = xn + p0 * g.Q;
        ldcol = HW;
      } else {
#pragma omp parallel for schedule(static)
        for (i64 row = 0; row < g.CRS; ++row)
          im2col_row(pr, g, xn, row, p0, p1, colbuf + row * cols);
        col = colbuf;
        ldcol = cols;
      }
      for (i64 gi = 0; gi < pr.groups; ++gi)
        gemm<T>(false, true, g.Kg, g.CgRS, cols, dyn + gi * g.Kg * PQ + p0 * g.Q, PQ,
                col + gi * g.CgRS * ldcol, ldcol, dw + gi * g.Kg * g.CgRS, g.CgRS, !first);
      first = false;
    }
  }
}

}  // namespace

void register_conv_im2col() {
  ConvTable::Variant v = floating_variant(
      "cpu.im2col",
      conv_pass_fn("conv2d cpu.im2col",
                   {forward<float>, backward_data<float>, backward_weights<float>},
                   {forward<double>, backward_data<double>, backward_weights<double>}),
      "own im2col/col2im (OpenMP) + the gemm table, chunked, bias/relu fused");
  v.tags = {kTagWorkspace};  // the column buffer of a chunk
  conv_table().add(std::move(v));
}

}  // namespace anvil::kernels
