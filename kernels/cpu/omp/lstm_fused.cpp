// SPDX-License-Identifier: Apache-2.0
// One LSTM layer, forward and backward, as GEMMs from the `gemm` table plus one fused OpenMP
// pass per time step (variant `cpu.fused`, f32 and f64; `cpu.fused.packed`, f32, the same with
// W_hh^T packed once per call, Note [Prepacked recurrent weight]). Layout
// (engine/dispatch/lstm_problem.h): x [T, B, I], y [T, B, H], gate blocks (i, f, g, o) of 4H
// columns; all dense row-major.
// Forward: G[T*B, 4H] = X @ W_ih^T in ONE GEMM; per step G_t += h_{t-1} @ W_hh^T, then one pass
// adds the bias, applies the nonlinearities and updates c and h. Backward: per step one pass
// for the gate gradients dG_t and one GEMM dh = dG_t @ W_hh; then one GEMM each for dx, dW_ih
// and dW_hh over all steps (Note [Fused LSTM saved state]). With several threads the per-step
// work is split by batch rows, not inside each step (Note [Batch-row-parallel recurrence]).
#include "kernels/cpu/omp/lstm_fused.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/tensor.h"
#include "engine/core/transpose.h"
#include "engine/dispatch/gemm_call.h"
#include "engine/dispatch/lstm_problem.h"
#include "engine/dispatch/selection.h"
#include "kernels/cpu/blocked/gemm_blocked.h"
#include "kernels/cpu/omp/omp_kernels.h"
#include "kernels/cpu/vec_math.h"

namespace anvil::kernels {
namespace {

// Note [Fused LSTM saved state]
// forward_training keeps, besides what the caller already holds (x, weights, h0, c0, y):
//   gates [T, B, 4H]  the activated gates i, f, g (tanh), o of every step;
//   c     [T, B, H]   the cell state of every step.
// tanh(c_t) is recomputed in backward (one tanh per element per step, cheaper than storing
// and re-reading another [T, B, H]). h_{t-1} is y[t-1] (or h0). Backward needs nothing else.
// Inference keeps nothing: the gate buffer is freed and c ping-pongs between two [B, H] rows.
struct FusedSaved final : LstmSaved {
  Tensor gates;  // [T, B, 4H]
  Tensor c;      // [T, B, H]
};

// The f32 passes use the vectorisable exp of kernels/cpu/vec_math.h in its normal-range form
// (Note [Vectorised exp], exp_f32_normal: 1 ulp from std::exp on [-87, 88], clamped outside,
// where sigmoid and tanh have saturated); f64 keeps std::exp and std::tanh.
template <typename T>
__attribute__((always_inline)) inline T sigmoid_t(T x) {
  if constexpr (std::is_same_v<T, float>)
    return 1.0f / (1.0f + vec::exp_f32_normal(-x));
  else
    return T(1) / (T(1) + std::exp(-x));
}
template <typename T>
__attribute__((always_inline)) inline T tanh_t(T x) {
  if constexpr (std::is_same_v<T, float>)
    return 2.0f / (1.0f + vec::exp_f32_normal(-2.0f * x)) - 1.0f;
  else
    return std::tanh(x);
}

// ---- the per-step pointwise passes ----------------------------------------------------------

// Rows [b0, b1) of one forward step. g [B, 4H]: x- and h-projections without bias; on return
// (store_gates) the activated gates. c_prev [B, H] or null (zeros); c, h [B, H] outputs.
// The flags are template parameters so that the inner loop has no branches and vectorises.
template <typename T, bool kHasPrev, bool kStore>
__attribute__((always_inline)) inline void forward_rows_body(
    const T* __restrict bias, T* __restrict g, const T* __restrict c_prev, T* __restrict c,
    T* __restrict h, std::int64_t b0, std::int64_t b1, std::int64_t H) {
  for (std::int64_t b = b0; b < b1; ++b) {
    T* __restrict gi = g + b * 4 * H;
    T* __restrict gf = gi + H;
    T* __restrict gg = gi + 2 * H;
    T* __restrict go = gi + 3 * H;
    const T* __restrict cp = kHasPrev ? c_prev + b * H : nullptr;
    T* __restrict cb = c + b * H;
    T* __restrict hb = h + b * H;
    const T* __restrict bi = bias;
    const T* __restrict bf = bias + H;
    const T* __restrict bg = bias + 2 * H;
    const T* __restrict bo = bias + 3 * H;
    for (std::int64_t j = 0; j < H; ++j) {
      const T i = sigmoid_t<T>(gi[j] + bi[j]);
      const T f = sigmoid_t<T>(gf[j] + bf[j]);
      const T gc = tanh_t<T>(gg[j] + bg[j]);
      const T o = sigmoid_t<T>(go[j] + bo[j]);
      T cn = i * gc;
      if constexpr (kHasPrev) cn += f * cp[j];
      cb[j] = cn;
      hb[j] = o * tanh_t<T>(cn);
      if constexpr (kStore) {
        gi[j] = i;
        gf[j] = f;
        gg[j] = gc;
        go[j] = o;
      }
    }
  }
}

// Rows [b0, b1) of one backward step. gates [B, 4H] activated; c [B, H] this step's cell;
// c_prev [B, H] or null (zeros); dy [B, H]; dh [B, H] or null (recurrent gradient into h_t);
// dc [B, H] in: gradient into c_t from step t+1, out: gradient into c_{t-1}; dg [B, 4H] out:
// gradients of the gate pre-activations.
template <typename T, bool kHasPrev, bool kHasDh>
__attribute__((always_inline)) inline void backward_rows_body(
    const T* __restrict gates, const T* __restrict c, const T* __restrict c_prev,
    const T* __restrict dy, const T* __restrict dh, T* __restrict dc, T* __restrict dg,
    std::int64_t b0, std::int64_t b1, std::int64_t H) {
  for (std::int64_t b = b0; b < b1; ++b) {
    const T* __restrict gi = gates + b * 4 * H;
    const T* __restrict gf = gi + H;
    const T* __restrict gg = gi + 2 * H;
    const T* __restrict go = gi + 3 * H;
    const T* __restrict cb = c + b * H;
    const T* __restrict cp = kHasPrev ? c_prev + b * H : nullptr;
    const T* __restrict dyb = dy + b * H;
    const T* __restrict dhb = kHasDh ? dh + b * H : nullptr;
    T* __restrict dcb = dc + b * H;
    T* __restrict di = dg + b * 4 * H;
    T* __restrict df = di + H;
    T* __restrict dgg = di + 2 * H;
    T* __restrict dout = di + 3 * H;
    for (std::int64_t j = 0; j < H; ++j) {
      const T i = gi[j], f = gf[j], gc = gg[j], o = go[j];
      const T tc = tanh_t<T>(cb[j]);
      T dht = dyb[j];
      if constexpr (kHasDh) dht += dhb[j];
      const T dct = dcb[j] + dht * o * (T(1) - tc * tc);
      T cprev = T(0);
      if constexpr (kHasPrev) cprev = cp[j];
      di[j] = dct * gc * i * (T(1) - i);
      df[j] = dct * cprev * f * (T(1) - f);
      dgg[j] = dct * i * (T(1) - gc * gc);
      dout[j] = dht * tc * o * (T(1) - o);
      dcb[j] = dct * f;
    }
  }
}

// Picks the instantiation for the run-time flags.
template <typename T>
__attribute__((always_inline)) inline void forward_rows_any(const T* bias, T* g, const T* c_prev,
                                                            T* c, T* h, std::int64_t b0,
                                                            std::int64_t b1, std::int64_t H,
                                                            bool store) {
  if (c_prev) {
    if (store)
      forward_rows_body<T, true, true>(bias, g, c_prev, c, h, b0, b1, H);
    else
      forward_rows_body<T, true, false>(bias, g, c_prev, c, h, b0, b1, H);
  } else {
    if (store)
      forward_rows_body<T, false, true>(bias, g, c_prev, c, h, b0, b1, H);
    else
      forward_rows_body<T, false, false>(bias, g, c_prev, c, h, b0, b1, H);
  }
}
template <typename T>
__attribute__((always_inline)) inline void backward_rows_any(const T* gates, const T* c,
                                                             const T* c_prev, const T* dy,
                                                             const T* dh, T* dc, T* dg,
                                                             std::int64_t b0, std::int64_t b1,
                                                             std::int64_t H) {
  if (c_prev) {
    if (dh)
      backward_rows_body<T, true, true>(gates, c, c_prev, dy, dh, dc, dg, b0, b1, H);
    else
      backward_rows_body<T, true, false>(gates, c, c_prev, dy, dh, dc, dg, b0, b1, H);
  } else {
    if (dh)
      backward_rows_body<T, false, true>(gates, c, c_prev, dy, dh, dc, dg, b0, b1, H);
    else
      backward_rows_body<T, false, false>(gates, c, c_prev, dy, dh, dc, dg, b0, b1, H);
  }
}

// f32 entry points cloned for AVX-512 / AVX2+FMA / baseline (resolved once at load time), so the
// library still runs on any x86-64 (never -march=native).
ANVIL_VEC_CLONES void forward_rows_f32(const float* bias, float* g, const float* c_prev, float* c,
                                       float* h, std::int64_t b0, std::int64_t b1, std::int64_t H,
                                       bool store_gates) {
  forward_rows_any<float>(bias, g, c_prev, c, h, b0, b1, H, store_gates);
}
ANVIL_VEC_CLONES void backward_rows_f32(const float* gates, const float* c, const float* c_prev,
                                        const float* dy, const float* dh, float* dc, float* dg,
                                        std::int64_t b0, std::int64_t b1, std::int64_t H) {
  backward_rows_any<float>(gates, c, c_prev, dy, dh, dc, dg, b0, b1, H);
}

template <typename T>
void forward_rows(const T* bias, T* g, const T* c_prev, T* c, T* h, std::int64_t b0,
                  std::int64_t b1, std::int64_t H, bool store_gates) {
  if constexpr (std::is_same_v<T, float>)
    forward_rows_f32(bias, g, c_prev, c, h, b0, b1, H, store_gates);
  else
    forward_rows_any<T>(bias, g, c_prev, c, h, b0, b1, H, store_gates);
}
template <typename T>
void backward_rows(const T* gates, const T* c, const T* c_prev, const T* dy, const T* dh, T* dc,
                   T* dg, std::int64_t b0, std::int64_t b1, std::int64_t H) {
  if constexpr (std::is_same_v<T, float>)
    backward_rows_f32(gates, c, c_prev, dy, dh, dc, dg, b0, b1, H);
  else
    backward_rows_any<T>(gates, c, c_prev, dy, dh, dc, dg, b0, b1, H);
}

// Splits rows [0, B) over the OpenMP team when the step is big enough to pay for it.
template <typename F>
void parallel_rows(std::int64_t B, std::int64_t H, F&& f) {
  const int nt = omp_get_max_threads();
  if (nt <= 1 || B * H < 4096) {
    f(std::int64_t{0}, B);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const std::int64_t b0 = B * t / n, b1 = B * (t + 1) / n;
    if (b0 < b1) f(b0, b1);
  }
}

// Note [Batch-row-parallel recurrence]
// Row b of h_t, c_t and of the gate gradients depends only on row b of the previous step (and
// on the shared weights): the batch entries of an LSTM never meet inside a layer. So with nt
// threads the recurrence is split by rows, once per layer: each thread runs its own block of
// rows through all T steps, with single-threaded per-step GEMMs on those rows
// (G_t[rows] += h_{t-1}[rows] W_hh^T forward, dh[rows] = dG_t[rows] W_hh backward) and the
// pointwise pass on the same rows. The threads meet once per layer instead of twice per step.
// The alternative, a parallel GEMM and a parallel pointwise pass per step, pays 2T fork/joins
// on [B, 4H] work of ~0.3 ms each; under passive waiting each one wakes a sleeping thread. One
// layer of lstm32 (T = 32, B = 128, I = H = 256), 2 threads, OMP_WAIT_POLICY=PASSIVE, best of 7
// (dev VM, 2026-11-22): forward 38-45 -> 24 ms, forward + backward 89 -> 72 ms; the lstm32
// training step, 2 threads, median of 15: 0.560 -> 0.520 s (1 thread: unchanged, 1.01 s).
// GEMMs called from inside the region run on the calling
// thread only: oneDNN, cpu.blocked and Eigen all check omp_in_parallel() (and the oneDNN
// primitive caches key on that thread count, onednn::threads_for_key()).
// Blocks have at least kMinRowsPerThread rows (a thinner GEMM loses more per row than the
// fork/join costs); smaller batches, one thread, or a caller already inside a parallel region
// run one block [0, B) whose GEMMs and pointwise passes use the team as before.
constexpr std::int64_t kMinRowsPerThread = 16;

// Calls body(b0, b1, inner_parallel) for row blocks covering [0, B). inner_parallel is true
// when a single block runs outside any row split (its GEMMs and passes may fork). Exceptions
// from the threads are rethrown here (an exception must not leave an OpenMP region).
template <typename F>
void for_row_blocks(std::int64_t B, F&& body) {
  const int nt = omp_get_max_threads();
  const std::int64_t blocks = std::min<std::int64_t>(nt, B / kMinRowsPerThread);
  if (omp_in_parallel() || blocks <= 1) {
    body(std::int64_t{0}, B, true);
    return;
  }
  // A ForceVariant guard holds for its own thread only: the caller's forced GEMM (guard, CLI
  // or environment) must reach the GEMMs of the other threads too.
  const std::string forced_gemm = forced_variant("gemm");
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(blocks));
#pragma omp parallel num_threads(static_cast <int>(blocks))
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const std::int64_t b0 = B * t / n, b1 = B * (t + 1) / n;
    try {
      std::optional<ForceVariant> same_gemm;
      if (!forced_gemm.empty()) same_gemm.emplace("gemm", forced_gemm);
      if (b0 < b1) body(b0, b1, false);
    } catch (...) {
      errors[static_cast<std::size_t>(t)] = std::current_exception();
    }
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// ---- GEMMs through the gemm table -------------------------------------------------------------

// One GEMM shape of the layer, selected once and run many times (the per-step recurrent GEMMs:
// selection costs microseconds, T steps need it once); Note [GEMM through the table].
// Row-major C[m, n] = op(A) op(B) (+ C when beta_one), leading dims as in GemmProblem.
GemmCall gemm_call(DType dt, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
                   std::int64_t lda, std::int64_t ldb, std::int64_t ldc, bool beta_one) {
  GemmProblem p = GemmProblem::dense(m, n, k, ta, tb, dt);
  p.lda = lda;
  p.ldb = ldb;
  p.ldc = ldc;
  p.beta_zero = !beta_one;
  return GemmCall(p);
}

// Note [Transposed weight gradients]
// dW [G, n] = dG^T @ X (dG [rows, G], X [rows, n]; G = 4H gate columns, n = I or H) is a TN GEMM
// with a tall, narrow C. Its transpose dW^T [n, G] = X^T @ dG is the same FLOPs with a short, wide
// C, which the GEMMs run faster; transposing the [n, G] result into place (engine/core/
// transpose.h) costs a 1 MB copy (0.15-0.25 ms). lstm32 layer shape (rows 4096, G 1024, n 256),
// default GEMM selection, interleaved medians of 28 (dev VM, 2026-11-22): 1 thread 24.0 -> 21.2 ms
// per weight gradient with a 0.75 ms copy; 2 threads 12.5 -> 11.5 ms. The lstm32 training step has
// four of them: 0.912 -> 0.897 s at 1 thread, 0.463 -> 0.458 s at 2 (medians of 15 / 30 steps,
// processes of the two libraries interleaved). Taken when n < G and n >= kMinTransposedN (the
// measured side of the trade; narrower inputs, as lstm_imdb's 32, keep the direct form).
constexpr std::int64_t kMinTransposedN = 128;

class WeightGrad {
 public:
  // dw [g, n]: the gradient's destination.
  WeightGrad(DType dt, std::int64_t g, std::int64_t n, void* dw) : dt_(dt), g_(g), n_(n), dw_(dw) {
    if (n < g && n >= kMinTransposedN) t_ = Tensor::empty({n, g}, dt);
  }
  // Adds (or, with beta_one false, sets) dG^T @ X for `rows` rows of dG and X.
  void add(const void* dg, const void* x, std::int64_t rows, bool beta_one) {
    if (t_.defined())
      gemm_call(dt_, true, false, n_, g_, rows, n_, g_, g_, beta_one).run(x, dg, t_.data_ptr());
    else
      gemm_call(dt_, true, false, g_, n_, rows, g_, n_, n_, beta_one).run(dg, x, dw_);
  }
  // Moves a transposed result into dw (nothing to do for the direct form).
  void finish() {
    if (!t_.defined()) return;
    if (dt_ == DType::f32)
      transpose_2d(t_.data<float>(), n_, g_, g_, static_cast<float*>(dw_), n_);
    else
      transpose_2d(t_.data<double>(), n_, g_, g_, static_cast<double*>(dw_), n_);
  }

 private:
  DType dt_;
  std::int64_t g_, n_;
  void* dw_;
  Tensor t_;  // dW^T [n, g] when the transposed form is taken
};

// ---- the per-step recurrent products -----------------------------------------------------------

// Note [Prepacked recurrent weight]
// The variants `cpu.fused` and `cpu.fused.packed` differ only in how the forward pass runs its
// per-step product with W_hh, G_t[rows] += h_{t-1}[rows] W_hh^T: `cpu.fused` calls the `gemm`
// table each step (the heuristic picks oneDNN's matmul primitive for this transposed-B,
// 64-128-row shape; a B in plain layout is copied into the primitive's blocked layout inside
// every call, as far as we read oneDNN 2.6's brgemm matmul (not profiled here): up to 1 MB per
// step and thread);
// `cpu.fused.packed` packs W_hh^T once per layer call into cpu.blocked's panel layout
// (BlockedPackedB, Note [Prepacked B]) and every thread multiplies its rows with that one copy.
// The weights change only between optimizer steps, so once per layer call is once per update.
// One layer of lstm32 (T = 32, B = 128, I = H = 256), anvil_bench kernel/lstm rows, medians of 3
// interleaved repetitions (dev VM, 2026-11-28): forward 45.6 -> 43.8 ms at 1 thread, 28.8 ->
// 24.1 ms at 2. Backward's product dh[rows] = dG_t[rows] W_hh was tried the same way and is not
// taken: with K = 4H = 1024 the packed product runs in three K blocks of 342 (cpu.blocked's KC),
// and the backward pass measured 84.2 -> 87.8 ms at 1 thread, 54.2 -> 54.6 ms at 2, so both
// variants run it through the table (oneDNN's sgemm, rule 6 of Note [GEMM heuristic]).
// f32 only, and only on a CPU with AVX-512F or AVX2+FMA (cpu.blocked's micro-kernels). With
// several threads and a batch too small to split by rows (Note [Batch-row-parallel
// recurrence]), the packed product runs on the calling thread only. The big GEMMs (input
// projection, dx, dW) are unchanged: they go through the table once each.
enum class Recurrence { table_gemm, prepacked };

// A per-step product: rows of A [rows, k] times op(W) [k, n] into C [rows, n], dense,
// accumulating into C or not, by the table's GEMM (selected once here) or the prepacked weight.
template <typename T>
class StepProduct {
 public:
  StepProduct(const BlockedPackedB* packed, DType dt, bool trans_w, std::int64_t rows,
              std::int64_t n, std::int64_t k, bool accumulate)
      : packed_(packed), accumulate_(accumulate), n_(n), k_(k) {
    if (packed_ == nullptr)
      call_.emplace(gemm_call(dt, false, trans_w, rows, n, k, k, trans_w ? k : n, n, accumulate));
  }
  // C[rows, n] (+)= A[rows, k] @ op(W); A and C dense (lda k, ldc n).
  void run(const T* a, const void* w, T* c, std::int64_t rows) {
    if constexpr (std::is_same_v<T, float>) {
      if (packed_ != nullptr) {
        packed_->multiply(a, k_, false, rows, c, n_, accumulate_);
        return;
      }
    }
    call_->run(a, w, c);
  }

 private:
  const BlockedPackedB* packed_;
  bool accumulate_;
  std::int64_t n_, k_;
  std::optional<GemmCall> call_;
};

// W_hh^T [H, 4H] packed as op(B) of the forward per-step product (W_hh [4H, H] read
// transposed), or nothing for Recurrence::table_gemm.
std::optional<BlockedPackedB> pack_w_hh_t(Recurrence r, const void* w_hh, std::int64_t H) {
  if (r != Recurrence::prepacked) return std::nullopt;
  return std::optional<BlockedPackedB>(std::in_place, static_cast<const float*>(w_hh), H, true, H,
                                       4 * H);
}

// ---- forward ---------------------------------------------------------------------------------

template <typename T>
void lstm_forward(const LstmArgs& a, Recurrence recurrence, const char* variant) {
  const LstmProblem& p = a.problem;
  const std::int64_t T_ = p.T, B = p.B, I = p.I, H = p.H, G = 4 * H;
  const bool training = p.pass == LstmPass::forward_training;
  const DType dt = p.dtype;
  const auto* x = static_cast<const T*>(a.x);
  const auto* h0 = static_cast<const T*>(a.h0);
  const auto* c0 = static_cast<const T*>(a.c0);
  auto* y = static_cast<T*>(a.y);

  // Combined bias [4H] (b_ih + b_hh when there are two).
  std::vector<T> bias(static_cast<std::size_t>(G));
  const auto* b_ih = static_cast<const T*>(a.b_ih);
  const auto* b_hh = static_cast<const T*>(a.b_hh);
  for (std::int64_t j = 0; j < G; ++j) bias[j] = b_ih[j] + (b_hh ? b_hh[j] : T(0));

  std::shared_ptr<FusedSaved> saved;
  Tensor gates, cseq;
  if (training) {
    saved = std::make_shared<FusedSaved>();
    saved->variant = variant;
    saved->gates = Tensor::empty({T_, B, G}, dt);
    saved->c = Tensor::empty({T_, B, H}, dt);
    gates = saved->gates;
    cseq = saved->c;
  } else {
    gates = Tensor::empty({T_, B, G}, dt);
    cseq = Tensor::empty({2, B, H}, dt);  // ping-pong
  }
  T* g = gates.data<T>();
  T* cs = cseq.data<T>();

  // G = X @ W_ih^T for all steps at once: [T*B, I] x [I, 4H] (NT).
  gemm_call(dt, false, true, T_ * B, G, I, I, I, G, false).run(x, a.w_ih, g);
  const T* bp = bias.data();
  const std::optional<BlockedPackedB> w_hh_t = pack_w_hh_t(recurrence, a.w_hh, H);
  const BlockedPackedB* packed = w_hh_t ? &*w_hh_t : nullptr;
  for_row_blocks(B, [&](std::int64_t b0, std::int64_t b1, bool inner_parallel) {
    // G_t[b0:b1] += h_{t-1}[b0:b1] @ W_hh^T
    StepProduct<T> rec(packed, dt, true, b1 - b0, G, H, true);
    for (std::int64_t t = 0; t < T_; ++t) {
      T* gt = g + t * B * G;
      const T* h_prev = t == 0 ? h0 : y + (t - 1) * B * H;
      if (h_prev) rec.run(h_prev + b0 * H, a.w_hh, gt + b0 * G, b1 - b0);
      const T* c_prev;
      T* c_out;
      if (training) {
        c_prev = t == 0 ? c0 : cs + (t - 1) * B * H;
        c_out = cs + t * B * H;
      } else {
        c_prev = t == 0 ? c0 : cs + ((t - 1) & 1) * B * H;
        c_out = cs + (t & 1) * B * H;
      }
      T* h_out = y + t * B * H;
      auto rows = [&](std::int64_t r0, std::int64_t r1) {
        forward_rows<T>(bp, gt, c_prev, c_out, h_out, r0, r1, H, training);
      };
      if (inner_parallel)
        parallel_rows(B, H, rows);
      else
        rows(b0, b1);
    }
  });
  const std::size_t state_bytes = static_cast<std::size_t>(B * H) * sizeof(T);
  const T* c_last = training ? cs + (T_ - 1) * B * H : cs + ((T_ - 1) & 1) * B * H;
  std::memcpy(a.h_n, y + (T_ - 1) * B * H, state_bytes);
  std::memcpy(a.c_n, c_last, state_bytes);
  if (training) {
    ANVIL_CHECK(a.saved != nullptr, variant, "forward_training needs a slot for saved state");
    *a.saved = saved;
  }
}

// ---- backward --------------------------------------------------------------------------------

template <typename T>
void lstm_backward(const LstmArgs& a, const char* variant) {
  const LstmProblem& p = a.problem;
  const std::int64_t T_ = p.T, B = p.B, I = p.I, H = p.H, G = 4 * H;
  const DType dt = p.dtype;
  const FusedSaved& saved = saved_state_of<FusedSaved>(a, variant);
  const T* gates = saved.gates.data<T>();
  const T* cs = saved.c.data<T>();
  const auto* c0 = static_cast<const T*>(a.c0);
  const auto* h0 = static_cast<const T*>(a.h0);
  const auto* y = static_cast<const T*>(a.y);
  const auto* dy = static_cast<const T*>(a.dy);

  Tensor dgates = Tensor::empty({T_, B, G}, dt);  // [T, B, 4H] pre-activation gradients
  Tensor state = Tensor::empty({2, B, H}, dt);    // dh, dc
  T* dg = dgates.data<T>();
  T* dh = state.data<T>();
  T* dc = dh + B * H;
  const std::size_t state_bytes = static_cast<std::size_t>(B * H) * sizeof(T);
  bool have_dh = a.dh_n != nullptr;
  if (a.dh_n) std::memcpy(dh, a.dh_n, state_bytes);
  if (a.dc_n)
    std::memcpy(dc, a.dc_n, state_bytes);
  else
    std::memset(dc, 0, state_bytes);

  for_row_blocks(B, [&](std::int64_t b0, std::int64_t b1, bool inner_parallel) {
    // dh[b0:b1] = dG_t[b0:b1] @ W_hh  ([rows, 4H] x [4H, H]), through the table in both variants
    StepProduct<T> dh_gemm(nullptr, dt, false, b1 - b0, H, G, false);
    bool rows_have_dh = have_dh;
    for (std::int64_t t = T_ - 1; t >= 0; --t) {
      const T* gt = gates + t * B * G;
      const T* ct = cs + t * B * H;
      const T* c_prev = t == 0 ? c0 : cs + (t - 1) * B * H;
      const T* dyt = dy + t * B * H;
      T* dgt = dg + t * B * G;
      const T* dh_in = rows_have_dh ? dh : nullptr;
      auto rows = [&](std::int64_t r0, std::int64_t r1) {
        backward_rows<T>(gt, ct, c_prev, dyt, dh_in, dc, dgt, r0, r1, H);
      };
      if (inner_parallel)
        parallel_rows(B, H, rows);
      else
        rows(b0, b1);
      if (t > 0 || a.dh0) {
        dh_gemm.run(dgt + b0 * G, a.w_hh, dh + b0 * H, b1 - b0);
        rows_have_dh = true;
      }
    }
  });
  if (a.dh0) std::memcpy(a.dh0, dh, state_bytes);
  if (a.dc0) std::memcpy(a.dc0, dc, state_bytes);

  // dx = dG @ W_ih: [T*B, 4H] x [4H, I] (NN).
  if (a.dx) gemm_call(dt, false, false, T_ * B, I, G, G, I, I, false).run(dg, a.w_ih, a.dx);
  // dW_ih = dG^T @ X: [4H, T*B] x [T*B, I] (TN).
  if (a.dw_ih) {
    WeightGrad wg(dt, G, I, a.dw_ih);
    wg.add(dg, a.x, T_ * B, false);
    wg.finish();
  }
  // dW_hh = sum_t dG_t^T @ h_{t-1} = dG[1:]^T @ Y[:-1] (+ dG_0^T @ h0): one TN GEMM (two with h0).
  if (a.dw_hh) {
    WeightGrad wg(dt, G, H, a.dw_hh);
    wg.add(dg + B * G, y, (T_ - 1) * B, false);
    if (h0) wg.add(dg, h0, B, true);
    wg.finish();
  }
  // db = column sums of dG over all T*B rows (the reduce kernel: double accumulators, columns
  // split over the threads); both bias vectors get it.
  if (a.db_ih || a.db_hh) {
    T* db = static_cast<T*>(a.db_ih ? a.db_ih : a.db_hh);
    reduce_sum<T>(dg, db, 1, T_ * B, G, 1.0);
    if (a.db_ih && a.db_hh) std::memcpy(a.db_hh, a.db_ih, static_cast<std::size_t>(G) * sizeof(T));
  }
}

template <typename T>
void run_typed(const LstmArgs& a, Recurrence r, const char* variant) {
  if (a.problem.pass == LstmPass::backward)
    lstm_backward<T>(a, variant);
  else
    lstm_forward<T>(a, r, variant);
}

void run_variant(const LstmArgs& a, Recurrence r, const char* variant) {
  const LstmProblem& p = a.problem;
  ANVIL_CHECK(p.T >= 1 && p.B >= 1 && p.I >= 1 && p.H >= 1, variant, "empty problem ", p.repr());
  if (p.dtype == DType::f32)
    run_typed<float>(a, r, variant);
  else if (p.dtype == DType::f64 && r == Recurrence::table_gemm)
    run_typed<double>(a, r, variant);
  else
    fail(variant, "unsupported dtype in ", p.repr());
}

void run_fused(const LstmArgs& a) { run_variant(a, Recurrence::table_gemm, "cpu.fused"); }
void run_fused_packed(const LstmArgs& a) {
  run_variant(a, Recurrence::prepacked, "cpu.fused.packed");
}

}  // namespace

void register_lstm_fused() {
  lstm_table().add({
      .name = "cpu.fused",
      .supports =
          [](const LstmProblem& p) {
            if (p.dtype != DType::f32 && p.dtype != DType::f64)
              return Support::no(
                  detail::str_cat("cpu.fused handles f32/f64, got ", dtype_name(p.dtype)));
            return Support::yes();
          },
      .fn = run_fused,
      .description =
          "one input GEMM for all steps, per-step recurrent GEMM + fused OpenMP gate pass",
  });
  lstm_table().add({
      .name = "cpu.fused.packed",
      .supports =
          [](const LstmProblem& p) {
            if (p.dtype != DType::f32)
              return Support::no(
                  detail::str_cat("cpu.fused.packed handles f32 only, got ", dtype_name(p.dtype)));
            if (std::string(gemm_blocked_isa()) == "none")
              return Support::no(
                  "cpu.fused.packed needs AVX-512F or AVX2+FMA; this CPU has "
                  "neither");
            return Support::yes();
          },
      .fn = run_fused_packed,
      .description = "cpu.fused with W_hh^T packed once per layer call for the forward per-step "
                     "products (cpu.blocked micro-kernels)",
  });
}

}  // namespace anvil::kernels
