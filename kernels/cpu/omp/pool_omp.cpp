// SPDX-License-Identifier: Apache-2.0
// Pooling `cpu.omp`: max / average / adaptive-average 2-D pooling, forward and backward, f32 and
// f64, OpenMP-parallel over the N*C planes (each thread owns whole planes: no write conflicts);
// and its 16-bit twins cpu.bf16_via_f32 / cpu.f16_via_f32 (Note [16-bit pooling via f32 planes]).
// Layout: dense NCHW. Max workspace: int32 ih*W + iw per output, as `ref` (Note [Max-pool
// workspace]); ties and NaN resolve as in `ref` (first maximum in window order wins, a NaN
// always wins, the last one in window order).
//
// Note [Row-sweep pooling]
// A window-at-a-time loop has a 2..9-long inner loop: nothing to vectorise. Here an output row is
// built by sweeping the whole row once per window element (kh * kw sweeps): for output columns
// j in the interior range [jlo, jhi), whose windows lie fully inside the input, the sweep
//   acc[j] = op(acc[j], x_row[j*SW - PW + kw])
// is a long, branch-free loop over j that the compiler vectorises (strided loads for SW > 1);
// the few border columns take the clipped per-window path. Rows are clipped per output row.
// Average divisors factor into a row part and a column part (the window is a rectangle, also
// with count_include_pad), so y = acc * inv_h[i] * inv_w[j]. The backward of the average runs
// the same sweep as a scatter: dx_row[j*SW - PW + kw] += g[j].
#include <omp.h>

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "engine/core/half_types.h"
#include "engine/dispatch/floating_variant.h"
#include "engine/dispatch/pool_problem.h"
#include "kernels/cpu/omp/omp_kernels.h"

namespace anvil::kernels {
namespace {

// Below this many touched elements a parallel region costs more than it saves.
constexpr std::int64_t kParallelGrain = 16384;

// One axis (rows or columns) of a fixed-window pooling: clipped bounds and divisor factor of
// each output index, and the interior range whose windows need no clipping.
struct Axis {
  std::vector<std::int64_t> lo, hi;  // clipped input range [lo, hi) of output index i
  std::vector<double> inv;           // 1 / (divisor factor) for averages
  std::int64_t interior_lo = 0, interior_hi = 0;
};

Axis make_axis(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t s, std::int64_t pad,
               bool include_pad) {
  Axis a;
  a.lo.resize(out);
  a.hi.resize(out);
  a.inv.resize(out);
  a.interior_lo = out;
  a.interior_hi = out;
  bool seen_interior = false;
  for (std::int64_t i = 0; i < out; ++i) {
    const std::int64_t start = i * s - pad;
    const std::int64_t padded_end = std::min(start + k, in + pad);
    const std::int64_t lo = std::max<std::int64_t>(start, 0), hi = std::min(start + k, in);
    a.lo[i] = lo;
    a.hi[i] = hi;
    a.inv[i] = 1.0 / static_cast<double>(include_pad ? padded_end - start : hi - lo);
    const bool interior = start >= 0 && start + k <= in;
    if (interior && !seen_interior) {
      a.interior_lo = i;
      seen_interior = true;
    }
    if (interior) a.interior_hi = i + 1;
  }
  if (!seen_interior) a.interior_lo = a.interior_hi = 0;
  return a;
}

Axis make_adaptive_axis(std::int64_t in, std::int64_t out) {
  Axis a;
  a.lo.resize(out);
  a.hi.resize(out);
  a.inv.resize(out);
  for (std::int64_t i = 0; i < out; ++i) {
    a.lo[i] = adaptive_start(i, in, out);
    a.hi[i] = adaptive_end(i, in, out);
    a.inv[i] = 1.0 / static_cast<double>(a.hi[i] - a.lo[i]);
  }
  return a;
}

// ---- fixed windows, one plane ------------------------------------------------------------------

// Max pooling of one plane; idx (may be null) receives ih*W + iw of each maximum.
template <typename T>
[[gnu::always_inline]] inline void max_plane(const PoolProblem& p, const Axis& rows,
                                             const Axis& cols, const T* x, T* y,
                                             std::int32_t* idx) {
  const std::int64_t W = p.w, OW = p.ow, SW = p.sw, PW = p.pw, KW = p.kw;
  const std::int64_t jlo = cols.interior_lo, jhi = cols.interior_hi;
  constexpr T kLowest = -std::numeric_limits<T>::infinity();
  for (std::int64_t i = 0; i < p.oh; ++i) {
    T* yr = y + i * OW;
    std::int32_t* ir = idx ? idx + i * OW : nullptr;
    for (std::int64_t j = 0; j < OW; ++j) yr[j] = kLowest;
    if (ir)
      for (std::int64_t j = 0; j < OW; ++j)
        ir[j] = static_cast<std::int32_t>(rows.lo[i] * W + cols.lo[j]);
    for (std::int64_t h = rows.lo[i]; h < rows.hi[i]; ++h) {
      const T* xr = x + h * W;
      // Border columns first or last does not matter for ties: each column's own window is
      // still visited in row-major order (h outer, kw inner).
      for (std::int64_t j = 0; j < OW; ++j) {
        if (j == jlo) j = jhi;  // interior columns below
        if (j >= OW) break;
        for (std::int64_t w = cols.lo[j]; w < cols.hi[j]; ++w)
          if (xr[w] > yr[j] || xr[w] != xr[w]) {
            yr[j] = xr[w];
            if (ir) ir[j] = static_cast<std::int32_t>(h * W + w);
          }
      }
      for (std::int64_t k = 0; k < KW; ++k) {
        const T* xs = xr + k - PW;  // xs[j * SW] is column j*SW - PW + k
        if (ir) {
          const auto base = static_cast<std::int32_t>(h * W + k - PW);
          // The index update as a bit mask: with `gt ? a : b` GCC sees control flow and
          // does not vectorise for SSE2.
#pragma omp simd
          for (std::int64_t j = jlo; j < jhi; ++j) {
            const T v = xs[j * SW];
            const T cur = yr[j];
            const bool take = v > cur || v != v;  // NaN wins
            const std::int32_t m = -static_cast<std::int32_t>(take);
            yr[j] = take ? v : cur;
            ir[j] = ((base + static_cast<std::int32_t>(j * SW)) & m) | (ir[j] & ~m);
          }
        } else {
#pragma omp simd
          for (std::int64_t j = jlo; j < jhi; ++j) {
            const T v = xs[j * SW];
            yr[j] = v > yr[j] || v != v ? v : yr[j];
          }
        }
      }
    }
  }
}

template <typename T>
[[gnu::always_inline]] inline void avg_plane(const PoolProblem& p, const Axis& rows,
                                             const Axis& cols, const T* x, T* y) {
  const std::int64_t W = p.w, OW = p.ow, SW = p.sw, PW = p.pw, KW = p.kw;
  const std::int64_t jlo = cols.interior_lo, jhi = cols.interior_hi;
  for (std::int64_t i = 0; i < p.oh; ++i) {
    T* yr = y + i * OW;
    for (std::int64_t j = 0; j < OW; ++j) yr[j] = T(0);
    for (std::int64_t h = rows.lo[i]; h < rows.hi[i]; ++h) {
      const T* xr = x + h * W;
      for (std::int64_t j = 0; j < OW; ++j) {
        if (j == jlo) j = jhi;
        if (j >= OW) break;
        for (std::int64_t w = cols.lo[j]; w < cols.hi[j]; ++w) yr[j] += xr[w];
      }
      for (std::int64_t k = 0; k < KW; ++k) {
        const T* xs = xr + k - PW;
#pragma omp simd
        for (std::int64_t j = jlo; j < jhi; ++j) yr[j] += xs[j * SW];
      }
    }
    const T ih = static_cast<T>(rows.inv[i]);
    for (std::int64_t j = 0; j < OW; ++j) yr[j] *= ih * static_cast<T>(cols.inv[j]);
  }
}

// dx (zeroed by the caller) += the average's gradient for one plane; g is OW scratch.
template <typename T>
[[gnu::always_inline]] inline void avg_backward_plane(const PoolProblem& p, const Axis& rows,
                                                      const Axis& cols, const T* dy, T* dx, T* g) {
  const std::int64_t W = p.w, OW = p.ow, SW = p.sw, PW = p.pw, KW = p.kw;
  const std::int64_t jlo = cols.interior_lo, jhi = cols.interior_hi;
  for (std::int64_t i = 0; i < p.oh; ++i) {
    const T ih = static_cast<T>(rows.inv[i]);
    for (std::int64_t j = 0; j < OW; ++j) g[j] = dy[i * OW + j] * ih * static_cast<T>(cols.inv[j]);
    for (std::int64_t h = rows.lo[i]; h < rows.hi[i]; ++h) {
      T* dr = dx + h * W;
      for (std::int64_t j = 0; j < OW; ++j) {
        if (j == jlo) j = jhi;
        if (j >= OW) break;
        for (std::int64_t w = cols.lo[j]; w < cols.hi[j]; ++w) dr[w] += g[j];
      }
      for (std::int64_t k = 0; k < KW; ++k) {
        T* ds = dr + k - PW;
        // Within one sweep the targets j*SW + k - PW are distinct (SW >= 1).
#pragma omp simd
        for (std::int64_t j = jlo; j < jhi; ++j) ds[j * SW] += g[j];
      }
    }
  }
}

// Note [Pool ISA clones]
// The library is built for baseline x86-64 (SSE2; DESIGN.md: never -march=native). The f32 plane
// kernels are cloned by GCC for AVX-512 and AVX2 (target_clones: one ifunc, resolved once at
// load time from the running CPU), so the row sweeps use 16- or 8-wide vectors where available.
#if defined(__SANITIZE_THREAD__)  // Note [No clones under TSan] (kernels/cpu/vec_math.h)
#define ANVIL_POOL_CLONES
#else
#define ANVIL_POOL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
ANVIL_POOL_CLONES void max_plane_f32(const PoolProblem& p, const Axis& rows, const Axis& cols,
                                     const float* x, float* y, std::int32_t* idx) {
  max_plane<float>(p, rows, cols, x, y, idx);
}
ANVIL_POOL_CLONES void avg_plane_f32(const PoolProblem& p, const Axis& rows, const Axis& cols,
                                     const float* x, float* y) {
  avg_plane<float>(p, rows, cols, x, y);
}
ANVIL_POOL_CLONES void avg_backward_plane_f32(const PoolProblem& p, const Axis& rows,
                                              const Axis& cols, const float* dy, float* dx,
                                              float* g) {
  avg_backward_plane<float>(p, rows, cols, dy, dx, g);
}
#undef ANVIL_POOL_CLONES

template <typename T>
void max_plane_any(const PoolProblem& p, const Axis& rows, const Axis& cols, const T* x, T* y,
                   std::int32_t* idx) {
  if constexpr (std::is_same_v<T, float>)
    max_plane_f32(p, rows, cols, x, y, idx);
  else
    max_plane<T>(p, rows, cols, x, y, idx);
}
template <typename T>
void avg_plane_any(const PoolProblem& p, const Axis& rows, const Axis& cols, const T* x, T* y) {
  if constexpr (std::is_same_v<T, float>)
    avg_plane_f32(p, rows, cols, x, y);
  else
    avg_plane<T>(p, rows, cols, x, y);
}
template <typename T>
void avg_backward_plane_any(const PoolProblem& p, const Axis& rows, const Axis& cols, const T* dy,
                            T* dx, T* g) {
  if constexpr (std::is_same_v<T, float>)
    avg_backward_plane_f32(p, rows, cols, dy, dx, g);
  else
    avg_backward_plane<T>(p, rows, cols, dy, dx, g);
}

// ---- adaptive windows, one plane (bins of varying size: plain window loops) ---------------------

template <typename T>
void adaptive_plane(const PoolProblem& p, const Axis& rows, const Axis& cols, const T* x, T* y) {
  for (std::int64_t i = 0; i < p.oh; ++i)
    for (std::int64_t j = 0; j < p.ow; ++j) {
      T s = 0;
      for (std::int64_t h = rows.lo[i]; h < rows.hi[i]; ++h) {
        const T* xr = x + h * p.w;
#pragma omp simd reduction(+ : s)
        for (std::int64_t w = cols.lo[j]; w < cols.hi[j]; ++w) s += xr[w];
      }
      y[i * p.ow + j] = s * static_cast<T>(rows.inv[i] * cols.inv[j]);
    }
}

template <typename T>
void adaptive_backward_plane(const PoolProblem& p, const Axis& rows, const Axis& cols, const T* dy,
                             T* dx) {
  for (std::int64_t i = 0; i < p.oh; ++i)
    for (std::int64_t j = 0; j < p.ow; ++j) {
      const T g = dy[i * p.ow + j] * static_cast<T>(rows.inv[i] * cols.inv[j]);
      for (std::int64_t h = rows.lo[i]; h < rows.hi[i]; ++h) {
        T* dr = dx + h * p.w;
        for (std::int64_t w = cols.lo[j]; w < cols.hi[j]; ++w) dr[w] += g;
      }
    }
}

// ---- drivers ----------------------------------------------------------------------------------

// Adaptive pooling to 1x1 (global average: a contiguous plane sum) or to the input size (an
// identity, e.g. VGG16's 7x7 -> 7x7): straight loops, no windows. T may be a 16-bit type: the
// identity copies its bits, the sums read it as float (C) and round each output once.
template <typename T>
void run_global_or_identity(const PoolArgs& a) {
  using C = ComputeType<T>;
  const PoolProblem& p = a.problem;
  const std::int64_t planes = p.planes(), hw = p.h * p.w;
  const bool parallel = p.in_numel() >= kParallelGrain;
  const bool forward = p.pass != PoolPass::backward;
  if (p.oh == p.h && p.ow == p.w) {  // identity
    const T* src = static_cast<const T*>(forward ? a.x : a.dy);
    T* dst = static_cast<T*>(forward ? a.y : a.dx);
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t pl = 0; pl < planes; ++pl)
      std::copy(src + pl * hw, src + (pl + 1) * hw, dst + pl * hw);
    return;
  }
  const double inv = 1.0 / static_cast<double>(hw);
  if (forward) {
    const T* x = static_cast<const T*>(a.x);
    T* y = static_cast<T*>(a.y);
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t pl = 0; pl < planes; ++pl) {
      const T* xp = x + pl * hw;
      double total = 0;
      for (std::int64_t i0 = 0; i0 < hw; i0 += 512) {  // C lanes per block, blocks in double
        const std::int64_t i1 = std::min(hw, i0 + 512);
        C acc = 0;
#pragma omp simd reduction(+ : acc)
        for (std::int64_t i = i0; i < i1; ++i) acc += convert_element<C>(xp[i]);
        total += acc;
      }
      y[pl] = convert_element<T>(total * inv);
    }
    return;
  }
  const T* dy = static_cast<const T*>(a.dy);
  T* dx = static_cast<T*>(a.dx);
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t pl = 0; pl < planes; ++pl) {
    const T g = convert_element<T>(convert_element<double>(dy[pl]) * inv);
    std::fill(dx + pl * hw, dx + (pl + 1) * hw, g);
  }
}

// The windowed problem as the plane kernels take it: adaptive bins of one size
// (H % OH == 0, W % OW == 0) are the fixed windows kernel = stride = H / OH without padding, so
// they run on the vectorised sweeps.
struct Plan {
  PoolProblem p;
  Axis rows, cols;
  std::int64_t in_plane = 0, out_plane = 0;
  bool parallel = false;
};

Plan plan_of(const PoolProblem& problem) {
  Plan plan;
  PoolProblem& p = plan.p;
  p = problem;
  if (p.kind == PoolKind::adaptive_avg && p.h % p.oh == 0 && p.w % p.ow == 0) {
    p.kind = PoolKind::avg;
    p.kh = p.sh = p.h / p.oh;
    p.kw = p.sw = p.w / p.ow;
    p.ph = p.pw = 0;
  }
  const bool adaptive = p.kind == PoolKind::adaptive_avg;
  plan.rows = adaptive ? make_adaptive_axis(p.h, p.oh)
                       : make_axis(p.h, p.oh, p.kh, p.sh, p.ph, p.count_include_pad);
  plan.cols = adaptive ? make_adaptive_axis(p.w, p.ow)
                       : make_axis(p.w, p.ow, p.kw, p.sw, p.pw, p.count_include_pad);
  plan.in_plane = p.h * p.w;
  plan.out_plane = p.oh * p.ow;
  plan.parallel = p.in_numel() + p.out_numel() >= kParallelGrain;
  return plan;
}

bool is_global_or_identity(const PoolProblem& p) {
  return p.kind == PoolKind::adaptive_avg &&
         ((p.oh == 1 && p.ow == 1) || (p.oh == p.h && p.ow == p.w));
}

// One plane's forward; idx (may be null) receives the max positions.
template <typename T>
void forward_plane(const Plan& plan, const T* xp, T* yp, std::int32_t* idx) {
  switch (plan.p.kind) {
    case PoolKind::max:
      max_plane_any(plan.p, plan.rows, plan.cols, xp, yp, idx);
      break;
    case PoolKind::avg:
      avg_plane_any(plan.p, plan.rows, plan.cols, xp, yp);
      break;
    case PoolKind::adaptive_avg:
      adaptive_plane(plan.p, plan.rows, plan.cols, xp, yp);
      break;
  }
}

// One plane's backward into dxp (zeroed here); ip: the plane's max positions; g: OW scratch.
template <typename T>
void backward_plane(const Plan& plan, const T* dyp, T* dxp, const std::int32_t* ip, T* g) {
  std::fill(dxp, dxp + plan.in_plane, T(0));
  switch (plan.p.kind) {
    case PoolKind::max:
      for (std::int64_t o = 0; o < plan.out_plane; ++o) dxp[ip[o]] += dyp[o];
      break;
    case PoolKind::avg:
      avg_backward_plane_any(plan.p, plan.rows, plan.cols, dyp, dxp, g);
      break;
    case PoolKind::adaptive_avg:
      adaptive_backward_plane(plan.p, plan.rows, plan.cols, dyp, dxp);
      break;
  }
}

// The training forward's int32 workspace (max pooling), or null.
std::int32_t* make_workspace(const PoolArgs& a) {
  const PoolProblem& p = a.problem;
  if (p.kind != PoolKind::max || p.pass != PoolPass::forward_training) return nullptr;
  *a.workspace = Tensor::empty({p.n, p.c, p.oh, p.ow}, DType::i32);
  return a.workspace->data<std::int32_t>();
}

template <typename T>
void run(const PoolArgs& a) {
  if (is_global_or_identity(a.problem)) {
    run_global_or_identity<T>(a);
    return;
  }
  const Plan plan = plan_of(a.problem);
  const std::int64_t planes = plan.p.planes(), in_plane = plan.in_plane, out_plane = plan.out_plane;
  if (plan.p.pass != PoolPass::backward) {
    const T* x = static_cast<const T*>(a.x);
    T* y = static_cast<T*>(a.y);
    std::int32_t* idx = make_workspace(a);
#pragma omp parallel for schedule(static) if (plan.parallel)
    for (std::int64_t pl = 0; pl < planes; ++pl)
      forward_plane(plan, x + pl * in_plane, y + pl * out_plane,
                    idx ? idx + pl * out_plane : nullptr);
    return;
  }
  const T* dy = static_cast<const T*>(a.dy);
  T* dx = static_cast<T*>(a.dx);
  const std::int32_t* idx =
      plan.p.kind == PoolKind::max ? a.workspace->data<std::int32_t>() : nullptr;
#pragma omp parallel if (plan.parallel)
  {
    std::vector<T> g(static_cast<std::size_t>(plan.p.ow));
#pragma omp for schedule(static)
    for (std::int64_t pl = 0; pl < planes; ++pl)
      backward_plane(plan, dy + pl * out_plane, dx + pl * in_plane,
                     idx ? idx + pl * out_plane : nullptr, g.data());
  }
}

// Note [16-bit pooling via f32 planes]
// cpu.bf16_via_f32 / cpu.f16_via_f32 run a 16-bit problem on the f32 plane kernels above, one
// plane at a time: each thread widens its plane of x (or dy) into an f32 buffer (exact), runs the
// f32 sweep there and rounds the plane of y (or dx) into the 16-bit output once. A plane (55x55
// for AlexNet's pool1, 224x224 at most) stays in the core's cache between the three steps, so
// the cost over f32 pooling is two in-cache passes, not the two trips through memory of casting
// the whole tensor to f32 and back. Maxima are copied (exact), averages and the gradients summed
// in f32 and rounded once, and NaN propagates as in cpu.omp (the reason these, not oneDNN's
// bf16 max pooling, are the default for max pooling: Note [oneDNN max pooling and NaN]).
template <typename S>
void widen_plane(const S* src, std::int64_t n, float* dst) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i].to_float();
}
template <typename S>
void narrow_plane(const float* src, std::int64_t n, S* dst) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = S(src[i]);
}

template <typename S>
void run_via_f32(const PoolArgs& a) {
  if (is_global_or_identity(a.problem)) {
    run_global_or_identity<S>(a);
    return;
  }
  const Plan plan = plan_of(a.problem);
  const std::int64_t planes = plan.p.planes(), in_plane = plan.in_plane, out_plane = plan.out_plane;
  const bool forward = plan.p.pass != PoolPass::backward;
  std::int32_t* idx =
      forward ? make_workspace(a)
              : (plan.p.kind == PoolKind::max ? a.workspace->data<std::int32_t>() : nullptr);
  const S* in = static_cast<const S*>(forward ? a.x : a.dy);
  S* out = static_cast<S*>(forward ? a.y : a.dx);
  const std::int64_t in_n = forward ? in_plane : out_plane;  // elements read per plane
  const std::int64_t out_n = forward ? out_plane : in_plane;
#pragma omp parallel if (plan.parallel)
  {
    std::vector<float> src(static_cast<std::size_t>(in_n)), dst(static_cast<std::size_t>(out_n));
    std::vector<float> g(static_cast<std::size_t>(plan.p.ow));
#pragma omp for schedule(static)
    for (std::int64_t pl = 0; pl < planes; ++pl) {
      widen_plane(in + pl * in_n, in_n, src.data());
      std::int32_t* ip = idx ? idx + pl * out_plane : nullptr;
      if (forward)
        forward_plane<float>(plan, src.data(), dst.data(), ip);
      else
        backward_plane<float>(plan, src.data(), dst.data(), ip, g.data());
      narrow_plane(dst.data(), out_n, out + pl * out_n);
    }
  }
}

Support supports_omp(const PoolProblem& p) {
  if (Support s = floating_support(p.dtype); !s.ok) return s;  // "needs f32 or f64, got bf16"
  if (p.h * p.w > std::numeric_limits<std::int32_t>::max())
    return Support::no("cpu.omp stores max positions as int32: the plane is too large");
  return Support::yes();
}

// The 16-bit variant `name` for `dtype` (Note [16-bit pooling via f32 planes]).
template <typename S>
PoolTable::Variant via_f32_variant(const char* name, DType dtype) {
  return {.name = name,
          .supports =
              [name, dtype](const PoolProblem& p) {
                if (p.dtype != dtype)
                  return Support::no(detail::str_cat(name, " handles ", dtype_name(dtype),
                                                     " only, not ", dtype_name(p.dtype)));
                if (p.h * p.w > std::numeric_limits<std::int32_t>::max())
                  return Support::no("max positions are stored as int32: the plane is too large");
                return Support::yes();
              },
          .fn = run_via_f32<S>,
          .description = detail::str_cat(dtype_name(dtype),
                                         ": each plane widened to f32 in cache, cpu.omp's sweeps, "
                                         "rounded once (Note [16-bit pooling via f32 planes])")};
}

}  // namespace

void register_pool_omp() {
  for (PoolKind kind : {PoolKind::max, PoolKind::avg, PoolKind::adaptive_avg}) {
    pool_table(kind).add({.name = "cpu.omp",
                          .supports = supports_omp,
                          .fn = floating_fn(run<float>, run<double>),
                          .description = "OpenMP over N*C planes, vectorised row sweeps "
                                         "(Note [Row-sweep pooling])"});
    pool_table(kind).add(via_f32_variant<BFloat16>("cpu.bf16_via_f32", DType::bf16));
    pool_table(kind).add(via_f32_variant<Float16>("cpu.f16_via_f32", DType::f16));
  }
}

}  // namespace anvil::kernels
