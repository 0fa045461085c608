// SPDX-License-Identifier: Apache-2.0
// gemm_remedy/: DLBench's two remedies for the transpose penalty, on the shapes and variants of
// the gemm/ family (bench/gemm_bench.cpp), to be read against its direct modes:
//   gemm_remedy/<variant>/transpose_then_NN/<NT|TN|TT>/<shape>/threads:<t>
//   gemm_remedy/<variant>/grad_then_update/<shape>/threads:<t>
//   gemm_remedy/<variant>/fold_sgd/<shape>/threads:<t>
// and, with a usable GPU, the same for every CUDA variant with device:cuda in place of
// threads:<t> (Note [GPU GEMM remedies]).
//
// Note [GEMM transpose remedies]
// transpose_then_NN/<mode>: the operand(s) that <mode> reads transposed (A stored [K,M] for TN,
// B stored [N,K] for NT, both for TT) are transposed out of place into a workspace by
// transpose_into (Note [Out-of-place transpose]), then C = A B runs as NN. The transpose is
// timed work; the workspace is allocated once (as a caching allocator would hand it out). The
// transpose alone is timed in a loop of its own before the benchmark loop: counters
// `transpose_ms` and `transpose_share` (its fraction of one timed iteration).
// grad_then_update vs fold_sgd: the weight gradient of a Linear layer, dW = dY^T X (TN with the
// shape's M, N, K: dY stored [K,M], X [K,N], W [M,N]), then the SGD pass W -= lr dW
// (kernels::sgd_update, the kernel of optim::SGD::step; dW is a preallocated buffer), versus one
// GEMM W = -lr dY^T X + 1 W (what Note [Folded SGD] does in a training step). lr = 0.01.
// Validation (before timing, on the benchmark's own inputs): the remedy's result is compared in
// full with the plain GEMM of the same variant (direct mode; for the SGD pair W0 - lr C with
// C = dY^T X), max |diff| <= K * FLT_EPSILON (times lr for W, plus rounding of |W|); the
// transpose remedy's C and the SGD pair's plain dW are also checked against 48 double-precision
// samples of the definition (Note [Validate before timing]), so that a variant that is wrong the
// same way in both paths cannot pass. A mismatch is SkipWithError with both numbers.
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>

#include "bench/bench_support.h"
#include "bench/gemm_bench.h"
#include "bench/gpu_gemm_bench.h"
#include "bench/registrations.h"
#include "anvil/anvil.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/gemm.h"
#include "kernels/cpu/omp/omp_kernels.h"

namespace anvil::bench {
namespace {

constexpr double kLr = 0.01;

// Note [Out-of-place transpose]
// dst [cols, rows] = src [rows, cols]^T, both dense row-major. Tiles of 16 rows x 1024 columns are
// spread over the OpenMP threads (column tiles outermost, so one thread's consecutive tiles fill
// neighbouring lines of the same destination rows); inside a tile, 8x8 blocks are transposed in
// AVX2 registers, two blocks down the rows at a time so that each destination line (64 B) is
// written whole, with streaming stores (the copy is far larger than the cache and is read next by
// the GEMM's packing anyway). Measured on the 2048 x 26752 case (1 thread): a scalar 32x32 tile
// loop 2 GB/s (a column read at a 4 KiB-multiple stride evicts itself from its L1 set), AVX2
// blocks with ordinary stores 8-11 GB/s, with streaming stores 15 GB/s (memcpy: 16-18 GB/s).
// Without AVX2, or for the rows/columns left over by the 8x8 blocks, a plain loop.
void transpose_scalar(const float* src, float* dst, std::int64_t rows, std::int64_t cols,
                      std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
  for (std::int64_t c = c0; c < c1; ++c)
    for (std::int64_t r = r0; r < r1; ++r) dst[c * rows + r] = src[r * cols + c];
}

// d[c * ld + r] = s[r * ls + c] for r, c < 8.
template <bool kStream>
__attribute__((target("avx2"))) inline void transpose_8x8(const float* s, std::int64_t ls, float* d,
                                                          std::int64_t ld) {
  const __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ls),
               r2 = _mm256_loadu_ps(s + 2 * ls), r3 = _mm256_loadu_ps(s + 3 * ls),
               r4 = _mm256_loadu_ps(s + 4 * ls), r5 = _mm256_loadu_ps(s + 5 * ls),
               r6 = _mm256_loadu_ps(s + 6 * ls), r7 = _mm256_loadu_ps(s + 7 * ls);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
               t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
               t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  const __m256 out[8] = {
      _mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
      _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
      _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
      _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31)};
  for (int c = 0; c < 8; ++c) {
    if constexpr (kStream)
      _mm256_stream_ps(d + c * ld, out[c]);
    else
      _mm256_storeu_ps(d + c * ld, out[c]);
  }
}

template <bool kStream>
__attribute__((target("avx2"))) void transpose_avx2(const float* src, float* dst, std::int64_t rows,
                                                    std::int64_t cols) {
  constexpr std::int64_t kRows = 16, kCols = 1024;
#pragma omp parallel
  {
#pragma omp for collapse(2) schedule(static)
    for (std::int64_t c0 = 0; c0 < cols; c0 += kCols)
      for (std::int64_t r0 = 0; r0 < rows; r0 += kRows) {
        const std::int64_t r1 = std::min(r0 + kRows, rows), c1 = std::min(c0 + kCols, cols);
        const std::int64_t rb = r0 + (r1 - r0) / 8 * 8,
                           cb = c0 + (c1 - c0) / 8 * 8;  // ends of the 8x8 blocks
        for (std::int64_t c = c0; c < cb; c += 8)
          for (std::int64_t r = r0; r < rb; r += 8)
            transpose_8x8<kStream>(src + r * cols + c, cols, dst + c * rows + r, rows);
        transpose_scalar(src, dst, rows, cols, r0, rb, cb, c1);
        transpose_scalar(src, dst, rows, cols, rb, r1, c0, c1);
      }
    if constexpr (kStream) _mm_sfence();
  }
}

void transpose_into(const float* src, float* dst, std::int64_t rows, std::int64_t cols) {
  if (!__builtin_cpu_supports("avx2")) {
#pragma omp parallel for schedule(static)
    for (std::int64_t c = 0; c < cols; ++c)
      transpose_scalar(src, dst, rows, cols, 0, rows, c, c + 1);
  } else if (rows % 8 == 0 && reinterpret_cast<std::uintptr_t>(dst) % 32 == 0) {
    transpose_avx2<true>(src, dst, rows, cols);  // every 8x8 block's stores are 32-byte aligned
  } else {
    transpose_avx2<false>(src, dst, rows, cols);
  }
}

// Workspace of the current shape only (the benchmarks of one shape run next to each other), so
// that at most one shape's transposed copies are alive. With random interleaving it is rebuilt at
// each change of shape, before the benchmark's warm-up, never inside the timed loop.
struct Workspace {
  std::string shape;
  Tensor at, bt, c_ref, w0, w, dw;  // at [M,K], bt [K,N]; the rest M*N
};
Workspace& workspace_for(const Shape3& s) {
  static Workspace ws;
  if (ws.shape != s.name) {
    ws = Workspace{};
    Generator gen(43);
    ws.shape = s.name;
    ws.at = Tensor::empty({s.m, s.k});
    ws.bt = Tensor::empty({s.k, s.n});
    ws.c_ref = Tensor::empty({s.m, s.n});
    ws.w0 = uniform({s.m, s.n}, -1, 1, DType::f32, &gen);
    ws.w = Tensor::empty({s.m, s.n});
    ws.dw = Tensor::empty({s.m, s.n});
  }
  return ws;
}

double max_abs(const Tensor& t) {
  const float* p = t.data<float>();
  double m = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) m = std::max(m, static_cast<double>(std::abs(p[i])));
  return m;
}

// Empty when max |got - want| <= tol, else a message with the worst entry and the bound.
std::string full_mismatch(const Tensor& got, const Tensor& want, double tol, const char* what) {
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  double worst = 0;
  std::int64_t at = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i)
    if (const double d = std::abs(static_cast<double>(g[i]) - w[i]); d > worst) worst = d, at = i;
  if (worst <= tol) return {};
  return detail::str_cat(what, ": max |diff| ", worst, " at flat index ", at, " (", g[at], " vs ",
                         w[at], ") > tolerance ", tol);
}

// Runs `validate` (warm-up included; returns an error message or ""); false (after
// SkipWithError) on a mismatch or an exception (a variant refusing the problem).
template <typename Validate>
bool prepare(benchmark::State& state, Validate&& validate) {
  try {
    const std::string bad = validate();
    if (!bad.empty()) {
      state.SkipWithError(("validation failed: " + bad).c_str());
      return false;
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return false;
  }
  return true;
}

void run_transpose_then_nn(benchmark::State& state, const std::string& variant, bool ta, bool tb,
                           Shape3 s, int threads) {
  set_num_threads(threads);
  GemmBuffers& buf = gemm_buffers(s);
  Workspace& ws = workspace_for(s);
  const Tensor A = ta ? as_matrix(buf.a, s.k, s.m) : as_matrix(buf.a, s.m, s.k);
  const Tensor B = tb ? as_matrix(buf.b, s.n, s.k) : as_matrix(buf.b, s.k, s.n);
  const Tensor C = as_matrix(buf.c, s.m, s.n);
  const Tensor a_plain = ta ? ws.at : A, b_plain = tb ? ws.bt : B;
  const auto transposes = [&] {
    if (ta) transpose_into(A.data<float>(), ws.at.data<float>(), s.k, s.m);
    if (tb) transpose_into(B.data<float>(), ws.bt.data<float>(), s.n, s.k);
  };
  const auto body = [&] {
    transposes();
    ops::gemm(a_plain, false, b_plain, false, C);
  };
  const auto force = force_gemm_variant(variant);
  if (!prepare(state, [&] {
        state.SetLabel(gemm_table()
                           .select(ops::gemm_problem_for(a_plain, false, b_plain, false, C, 0.0))
                           .name);
        ops::gemm(A, ta, B, tb, ws.c_ref);  // the plain GEMM of the direct mode
        body();                             // warm-up (workspace page faults, primitives)
        std::string bad = full_mismatch(C, ws.c_ref, s.k * FLT_EPSILON, "C vs direct mode");
        if (bad.empty() && !(bad = sampled_mismatch(A, ta, B, tb, C)).empty())
          bad = "C vs the double-precision definition: " + bad;
        return bad;
      }))
    return;
  // The transpose alone, in a loop of its own: at least 3 runs and 0.05 s, mean time.
  int reps = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double transpose_s = 0;
  while (reps < 3 || transpose_s < 0.05) {
    transposes();
    ++reps;
    transpose_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  transpose_s /= reps;
  const double loop_s = time_gemm_loop(state, threads, 2.0 * s.m * s.n * s.k, body);
  state.counters["transpose_ms"] = transpose_s * 1e3;
  if (state.iterations() > 0)
    state.counters["transpose_share"] = transpose_s / (loop_s / state.iterations());
}

void run_sgd(benchmark::State& state, const std::string& variant, bool fold, Shape3 s,
             int threads) {
  set_num_threads(threads);
  GemmBuffers& buf = gemm_buffers(s);
  Workspace& ws = workspace_for(s);
  const Tensor dy_t = as_matrix(buf.a, s.k, s.m);  // dY stored [K,M], read transposed
  const Tensor X = as_matrix(buf.b, s.k, s.n);
  const std::int64_t mn = s.m * s.n;
  const auto body = [&] {
    if (fold) {
      ops::gemm(dy_t, true, X, false, ws.w, -kLr, 1.0);
    } else {
      ops::gemm(dy_t, true, X, false, ws.dw);
      kernels::sgd_update<float>(ws.w.data<float>(), ws.dw.data<float>(), nullptr, mn, kLr, 0, 0, 0,
                                 false, false);
    }
  };
  const auto force = force_gemm_variant(variant);
  if (!prepare(state, [&] {
        state.SetLabel(
            gemm_table()
                .select(ops::gemm_problem_for(dy_t, true, X, false, ws.w, fold ? 1.0 : 0.0))
                .name);
        ops::gemm(dy_t, true, X, false,
                  ws.c_ref);  // plain dW, itself checked against the definition
        if (std::string bad = sampled_mismatch(dy_t, true, X, false, ws.c_ref); !bad.empty())
          return "plain dW vs the double-precision definition: " + bad;
        Tensor want = Tensor::empty({s.m, s.n});
        const float* w0 = ws.w0.data<float>();
        const float* c = ws.c_ref.data<float>();
        float* e = want.data<float>();
        for (std::int64_t i = 0; i < mn; ++i)
          e[i] = static_cast<float>(w0[i] - kLr * static_cast<double>(c[i]));
        ws.w.copy_(ws.w0);
        body();  // warm-up and the result to check
        const double tol = kLr * s.k * FLT_EPSILON + 4 * FLT_EPSILON * max_abs(want);
        return full_mismatch(ws.w, want, tol, "W after the step vs W0 - lr * plain dW");
      }))
    return;
  time_gemm_loop(state, threads, 2.0 * s.m * s.n * s.k, body);
}

// ---- GPU: the same remedies on cuda:0 (Note [GPU GEMM remedies]) ----------------------------
//
// Note [GPU GEMM remedies]
// gemm_remedy/<cuda variant>/.../device:cuda mirrors the CPU benchmarks above on the GPU
// copies of the same inputs (gpu_gemm_buffers), timed by CUDA events (time_gpu_loop):
//  * transpose_then_NN/<mode>: the transposed operand(s) are copied out of place into a GPU
//    workspace by Tensor::copy_ from the transposed view (the engine's device-side strided copy,
//    CudaBackend::copy_on_device, on the same stream), then the NN GEMM of the forced variant.
//    The benchmarks may not include CUDA headers (DESIGN.md), so the transpose is the engine's
//    own; a cublasSgeam transpose would need an engine seam (an op table) that does not exist
//    yet. `transpose_ms` / `transpose_share` as on the CPU, in GPU time;
//  * grad_then_update: dW = dY^T X by the variant, then W -= lr dW by ops::add_ (the CUDA
//    elementwise variants), versus fold_sgd: one GEMM W = -lr dY^T X + 1 W.
// Validation mirrors the CPU one with gpu_gemm_rel_tol / gpu_gemm_pair_tol, so TF32 gets its
// looser bounds (Note [GPU GEMM validation]).
struct GpuWorkspace {
  std::string shape;
  Tensor at, bt, c_ref, w0, w, dw;  // on the GPU: at [M,K], bt [K,N]; the rest [M,N]
  Tensor host_w0;                   // the host copy of w0, for validation
};
GpuWorkspace& gpu_workspace_for(const Shape3& s) {
  static GpuWorkspace ws;
  if (ws.shape != s.name) {
    ws = GpuWorkspace{};
    const Device dev = gpu_bench_device();
    Generator gen(43);
    ws.shape = s.name;
    ws.at = Tensor::empty({s.m, s.k}, DType::f32, dev);
    ws.bt = Tensor::empty({s.k, s.n}, DType::f32, dev);
    ws.c_ref = Tensor::empty({s.m, s.n}, DType::f32, dev);
    ws.host_w0 = uniform({s.m, s.n}, -1, 1, DType::f32, &gen);
    ws.w0 = ws.host_w0.to(dev);
    ws.w = Tensor::empty({s.m, s.n}, DType::f32, dev);
    ws.dw = Tensor::empty({s.m, s.n}, DType::f32, dev);
  }
  return ws;
}

void run_gpu_transpose_then_nn(benchmark::State& state, const std::string& variant, bool ta,
                               bool tb, Shape3 s) {
  std::unique_ptr<ForceVariant> force;
  double transpose_s = 0;
  std::function<void()> transposes, body;
  GemmBuffers* dev = nullptr;
  GpuWorkspace* ws = nullptr;
  Tensor A, B, C, a_plain, b_plain;
  if (!prepare(state, [&] {
        const GemmBuffers& host = gemm_buffers(s);
        dev = &gpu_gemm_buffers(s);
        ws = &gpu_workspace_for(s);
        A = ta ? as_matrix(dev->a, s.k, s.m) : as_matrix(dev->a, s.m, s.k);
        B = tb ? as_matrix(dev->b, s.n, s.k) : as_matrix(dev->b, s.k, s.n);
        C = as_matrix(dev->c, s.m, s.n);
        a_plain = ta ? ws->at : A;
        b_plain = tb ? ws->bt : B;
        transposes = [&] {
          if (ta) ws->at.copy_(A.t());
          if (tb) ws->bt.copy_(B.t());
        };
        body = [&] {
          transposes();
          ops::gemm(a_plain, false, b_plain, false, C);
        };
        force = std::make_unique<ForceVariant>("gemm", variant);
        state.SetLabel(gemm_table()
                           .select(ops::gemm_problem_for(a_plain, false, b_plain, false, C, 0.0))
                           .name);
        ops::gemm(A, ta, B, tb, ws->c_ref);  // the plain GEMM of the direct mode
        body();                              // warm-up and the result to check
        const Tensor host_c = C.to(Device::cpu());
        std::string bad = full_mismatch(host_c, ws->c_ref.to(Device::cpu()),
                                        gpu_gemm_pair_tol(variant, s.k), "C vs direct mode");
        const Tensor host_a = ta ? as_matrix(host.a, s.k, s.m) : as_matrix(host.a, s.m, s.k);
        const Tensor host_b = tb ? as_matrix(host.b, s.n, s.k) : as_matrix(host.b, s.k, s.n);
        if (bad.empty() &&
            !(bad = sampled_mismatch(host_a, ta, host_b, tb, host_c, gpu_gemm_rel_tol(variant)))
                 .empty())
          bad = "C vs the double-precision definition: " + bad;
        if (!bad.empty()) return bad;
        // The transposes alone, GPU time: at least 3 runs and 0.05 s, mean.
        CudaBackend& cuda = require_cuda("gemm_remedy");
        int reps = 0;
        double total = 0;
        while (reps < 3 || total < 0.05) {
          total += cuda.time_on_stream(gpu_bench_device().index, transposes);
          ++reps;
        }
        transpose_s = total / reps;
        return std::string();
      }))
    return;
  const double per_call = time_gpu_loop(state, 2.0 * s.m * s.n * s.k, body);
  state.counters["transpose_ms"] = transpose_s * 1e3;
  if (per_call > 0) state.counters["transpose_share"] = transpose_s / per_call;
}

void run_gpu_sgd(benchmark::State& state, const std::string& variant, bool fold, Shape3 s) {
  std::unique_ptr<ForceVariant> force;
  std::function<void()> body;
  GpuWorkspace* ws = nullptr;
  Tensor dy_t, X;
  if (!prepare(state, [&] {
        const GemmBuffers& host = gemm_buffers(s);
        GemmBuffers& dev = gpu_gemm_buffers(s);
        ws = &gpu_workspace_for(s);
        dy_t = as_matrix(dev.a, s.k, s.m);  // dY stored [K,M], read transposed
        X = as_matrix(dev.b, s.k, s.n);
        body = [&] {
          if (fold) {
            ops::gemm(dy_t, true, X, false, ws->w, -kLr, 1.0);
          } else {
            ops::gemm(dy_t, true, X, false, ws->dw);
            ops::add_(ws->w, ws->dw, -kLr);
          }
        };
        force = std::make_unique<ForceVariant>("gemm", variant);
        state.SetLabel(
            gemm_table()
                .select(ops::gemm_problem_for(dy_t, true, X, false, ws->w, fold ? 1.0 : 0.0))
                .name);
        ops::gemm(dy_t, true, X, false,
                  ws->c_ref);  // plain dW, itself checked against the definition
        const Tensor hc = ws->c_ref.to(Device::cpu());
        if (std::string bad =
                sampled_mismatch(as_matrix(host.a, s.k, s.m), true, as_matrix(host.b, s.k, s.n),
                                 false, hc, gpu_gemm_rel_tol(variant));
            !bad.empty())
          return "plain dW vs the double-precision definition: " + bad;
        const std::int64_t mn = s.m * s.n;
        Tensor want = Tensor::empty({s.m, s.n});
        const float* w0 = ws->host_w0.data<float>();
        const float* c = hc.data<float>();
        float* e = want.data<float>();
        for (std::int64_t i = 0; i < mn; ++i)
          e[i] = static_cast<float>(w0[i] - kLr * static_cast<double>(c[i]));
        ws->w.copy_(ws->w0);
        body();  // warm-up and the result to check
        const double tol = kLr * gpu_gemm_pair_tol(variant, s.k) + 4 * FLT_EPSILON * max_abs(want);
        return full_mismatch(ws->w.to(Device::cpu()), want, tol,
                             "W after the step vs W0 - lr * plain dW");
      }))
    return;
  time_gpu_loop(state, 2.0 * s.m * s.n * s.k, body);
}

}  // namespace

void register_gemm_remedy_benchmarks() {
  const std::vector<std::string> variants = gemm_bench_variants();
  for (const auto& shape : gemm_shapes())
    for (const auto& variant : variants)
      for (int t : options().threads) {
        const std::string tail = detail::str_cat(shape.name, "/threads:", t);
        for (const char* mode : {"NT", "TN", "TT"}) {
          const bool ta = mode[0] == 'T', tb = mode[1] == 'T';
          register_gemm_benchmark(
              detail::str_cat("gemm_remedy/", variant, "/transpose_then_NN/", mode, "/", tail),
              shape,
              [=](benchmark::State& st) { run_transpose_then_nn(st, variant, ta, tb, shape, t); });
        }
        for (const bool fold : {false, true})
          register_gemm_benchmark(
              detail::str_cat("gemm_remedy/", variant, fold ? "/fold_sgd/" : "/grad_then_update/",
                              tail),
              shape, [=](benchmark::State& st) { run_sgd(st, variant, fold, shape, t); });
      }
  register_gpu_gemm_remedy_benchmarks();  // nothing without a usable CUDA device
}

void register_gpu_gemm_remedy_benchmarks() {
  if (!gpu_benchmarks_enabled()) return;
  const std::vector<std::string> variants = gpu_gemm_variants();
  const std::string suffix = gpu_name_suffix();
  for (const auto& shape : gemm_shapes())
    for (const auto& variant : variants) {
      const std::string tail = detail::str_cat(shape.name, "/", suffix);
      for (const char* mode : {"NT", "TN", "TT"}) {
        const bool ta = mode[0] == 'T', tb = mode[1] == 'T';
        register_gpu_benchmark(
            detail::str_cat("gemm_remedy/", variant, "/transpose_then_NN/", mode, "/", tail),
            [=](benchmark::State& st) { run_gpu_transpose_then_nn(st, variant, ta, tb, shape); });
      }
      for (const bool fold : {false, true})
        register_gpu_benchmark(
            detail::str_cat("gemm_remedy/", variant, fold ? "/fold_sgd/" : "/grad_then_update/",
                            tail),
            [=](benchmark::State& st) { run_gpu_sgd(st, variant, fold, shape); });
    }
}

}  // namespace anvil::bench
