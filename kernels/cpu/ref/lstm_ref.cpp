// SPDX-License-Identifier: Apache-2.0
// LSTM `ref`: one layer forward (inference and training) and backward, f32 and f64, written in
// the most direct form so that it can serve as the yardstick of the "lstm" table. Layout as in
// engine/dispatch/lstm_problem.h: x [T, B, I], y [T, B, H], gate blocks (i, f, g, o) of 4H
// columns; all dense row-major. Note [LSTM ref variant].
//
// Note [LSTM ref variant]
// ref runs the recurrence one time step at a time, exactly as the equations read:
//   forward:  G_t = x_t W_ih^T + h_{t-1} W_hh^T (two GEMMs per step); then per element, in
//             double: i, f, o = sigmoid, g = tanh of G_t + b_ih + b_hh; c_t = f c_{t-1} + i g;
//             h_t = o tanh(c_t);
//   backward: per step, the gate gradients dG_t per element in double, then dh_{t-1} = dG_t W_hh,
//             dx_t = dG_t W_ih, dW_ih += dG_t^T x_t, dW_hh += dG_t^T h_{t-1} (one GEMM each),
//             db accumulated in double.
// The GEMMs go through the gemm table (Note [GEMM through the table]), as the composition of
// autograd ops that ref used to be did through `linear`: the GEMM variants have their own
// reference tests, and a triple loop here would make validating the benchmarks' LSTM layers
// (lstm_imdb: 13 GFLOP per forward in f64) take minutes. The pointwise math uses std::exp and
// std::tanh in double, never the kernels' fast exp. A training forward keeps the activated
// gates and the cell states (RefSaved) for the backward; the backward is checked against
// central differences in float64 (tests/test_lstm.cpp).
#include "kernels/cpu/ref/lstm_ref.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/tensor.h"
#include "engine/dispatch/gemm_call.h"
#include "engine/dispatch/lstm_problem.h"

namespace anvil::kernels {
namespace {

struct RefSaved final : LstmSaved {
  Tensor gates;  // [T, B, 4H] activated i, f, g, o
  Tensor c;      // [T, B, H] the cell state of every step
};

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// A dense row-major GEMM C[m, n] (+)= op(A) op(B) of the problem's dtype.
GemmCall dense_gemm(DType dt, std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb,
                    bool accumulate) {
  GemmProblem p = GemmProblem::dense(m, n, k, ta, tb, dt);
  p.beta_zero = !accumulate;
  return GemmCall(p);
}

template <typename T>
void forward(const LstmArgs& a) {
  const LstmProblem& p = a.problem;
  const std::int64_t B = p.B, I = p.I, H = p.H, G = 4 * H;
  const bool training = p.pass == LstmPass::forward_training;
  const auto* x = static_cast<const T*>(a.x);
  const auto* h0 = static_cast<const T*>(a.h0);
  const auto* c0 = static_cast<const T*>(a.c0);
  const auto* b_ih = static_cast<const T*>(a.b_ih);
  const auto* b_hh = static_cast<const T*>(a.b_hh);
  auto* y = static_cast<T*>(a.y);

  std::shared_ptr<RefSaved> saved;
  if (training) {
    saved = std::make_shared<RefSaved>();
    saved->variant = "ref";
    saved->gates = Tensor::empty({p.T, B, G}, p.dtype);
    saved->c = Tensor::empty({p.T, B, H}, p.dtype);
  }
  std::vector<T> gt(static_cast<std::size_t>(B * G));  // G_t [B, 4H]
  std::vector<double> c(static_cast<std::size_t>(B * H), 0.0);
  if (c0)
    for (std::int64_t e = 0; e < B * H; ++e) c[e] = static_cast<double>(c0[e]);
  GemmCall x_proj = dense_gemm(p.dtype, B, G, I, false, true, false);  // x_t W_ih^T
  GemmCall h_proj = dense_gemm(p.dtype, B, G, H, false, true, true);   // += h_{t-1} W_hh^T
  for (std::int64_t t = 0; t < p.T; ++t) {
    x_proj.run(x + t * B * I, a.w_ih, gt.data());
    const T* h_prev = t == 0 ? h0 : y + (t - 1) * B * H;
    if (h_prev) h_proj.run(h_prev, a.w_hh, gt.data());
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t j = 0; j < H; ++j) {
        double z[4];
        for (int q = 0; q < 4; ++q) {
          const std::int64_t col = q * H + j;
          z[q] = static_cast<double>(gt[b * G + col]) + static_cast<double>(b_ih[col]) +
                 (b_hh ? static_cast<double>(b_hh[col]) : 0.0);
        }
        const double i = sigmoid(z[0]), f = sigmoid(z[1]), g = std::tanh(z[2]);
        const double o = sigmoid(z[3]);
        double& ce = c[b * H + j];
        ce = f * ce + i * g;
        y[(t * B + b) * H + j] = static_cast<T>(o * std::tanh(ce));
        if (training) {
          T* gs = saved->gates.data<T>() + (t * B + b) * G;
          gs[j] = static_cast<T>(i);
          gs[H + j] = static_cast<T>(f);
          gs[2 * H + j] = static_cast<T>(g);
          gs[3 * H + j] = static_cast<T>(o);
          saved->c.data<T>()[(t * B + b) * H + j] = static_cast<T>(ce);
        }
      }
    }
  }
  auto* h_n = static_cast<T*>(a.h_n);
  auto* c_n = static_cast<T*>(a.c_n);
  std::memcpy(h_n, y + (p.T - 1) * B * H, static_cast<std::size_t>(B * H) * sizeof(T));
  for (std::int64_t e = 0; e < B * H; ++e) c_n[e] = static_cast<T>(c[e]);
  if (training) {
    ANVIL_CHECK(a.saved != nullptr, "lstm ref", "forward_training needs a slot for saved state (",
                p.repr(), ")");
    *a.saved = saved;
  }
}

template <typename T>
void backward(const LstmArgs& a) {
  const LstmProblem& p = a.problem;
  const std::int64_t B = p.B, I = p.I, H = p.H, G = 4 * H;
  const RefSaved& saved = saved_state_of<RefSaved>(a, "lstm ref");
  const T* gates = saved.gates.data<T>();
  const T* cs = saved.c.data<T>();
  const auto* x = static_cast<const T*>(a.x);
  const auto* h0 = static_cast<const T*>(a.h0);
  const auto* c0 = static_cast<const T*>(a.c0);
  const auto* y = static_cast<const T*>(a.y);
  const auto* dy = static_cast<const T*>(a.dy);
  const auto* dh_n = static_cast<const T*>(a.dh_n);
  const auto* dc_n = static_cast<const T*>(a.dc_n);
  auto* dx = static_cast<T*>(a.dx);

  std::vector<T> dh(static_cast<std::size_t>(B * H), T(0));  // gradient into h_t from step t+1
  std::vector<double> dc(static_cast<std::size_t>(B * H), 0.0);
  for (std::int64_t e = 0; e < B * H; ++e) {
    if (dh_n) dh[e] = dh_n[e];
    if (dc_n) dc[e] = static_cast<double>(dc_n[e]);
  }
  std::vector<T> dgt(static_cast<std::size_t>(B * G));  // dG_t [B, 4H]
  std::vector<double> db(static_cast<std::size_t>(G), 0.0);
  std::memset(a.dw_ih, 0, static_cast<std::size_t>(G * I) * sizeof(T));
  std::memset(a.dw_hh, 0, static_cast<std::size_t>(G * H) * sizeof(T));
  GemmCall dh_gemm = dense_gemm(p.dtype, B, H, G, false, false, false);   // dG_t W_hh
  GemmCall dx_gemm = dense_gemm(p.dtype, B, I, G, false, false, false);   // dG_t W_ih
  GemmCall dw_ih_gemm = dense_gemm(p.dtype, G, I, B, true, false, true);  // += dG_t^T x_t
  GemmCall dw_hh_gemm = dense_gemm(p.dtype, G, H, B, true, false, true);  // += dG_t^T h_{t-1}
  for (std::int64_t t = p.T - 1; t >= 0; --t) {
    for (std::int64_t b = 0; b < B; ++b) {
      const T* gs = gates + (t * B + b) * G;
      for (std::int64_t j = 0; j < H; ++j) {
        const double i = gs[j], f = gs[H + j], g = gs[2 * H + j], o = gs[3 * H + j];
        const std::int64_t e = b * H + j;
        const double c_prev = t > 0 ? static_cast<double>(cs[(t - 1) * B * H + e])
                                    : (c0 ? static_cast<double>(c0[e]) : 0.0);
        const double tc = std::tanh(static_cast<double>(cs[t * B * H + e]));
        const double dht = static_cast<double>(dy[t * B * H + e]) + static_cast<double>(dh[e]);
        const double dct = dc[e] + dht * o * (1.0 - tc * tc);
        T* d = dgt.data() + b * G;
        d[j] = static_cast<T>(dct * g * i * (1.0 - i));
        d[H + j] = static_cast<T>(dct * c_prev * f * (1.0 - f));
        d[2 * H + j] = static_cast<T>(dct * i * (1.0 - g * g));
        d[3 * H + j] = static_cast<T>(dht * tc * o * (1.0 - o));
        dc[e] = dct * f;
      }
    }
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t col = 0; col < G; ++col) db[col] += static_cast<double>(dgt[b * G + col]);
    if (dx) dx_gemm.run(dgt.data(), a.w_ih, dx + t * B * I);
    dw_ih_gemm.run(dgt.data(), x + t * B * I, a.dw_ih);
    const T* h_prev = t == 0 ? h0 : y + (t - 1) * B * H;
    if (h_prev) dw_hh_gemm.run(dgt.data(), h_prev, a.dw_hh);
    if (t > 0 || a.dh0) dh_gemm.run(dgt.data(), a.w_hh, dh.data());
  }
  if (a.dh0) std::memcpy(a.dh0, dh.data(), static_cast<std::size_t>(B * H) * sizeof(T));
  if (a.dc0)
    for (std::int64_t e = 0; e < B * H; ++e) static_cast<T*>(a.dc0)[e] = static_cast<T>(dc[e]);
  for (void* out : {a.db_ih, a.db_hh})
    if (out)
      for (std::int64_t col = 0; col < G; ++col)
        static_cast<T*>(out)[col] = static_cast<T>(db[col]);
}

void run_ref(const LstmArgs& a) {
  const LstmProblem& p = a.problem;
  ANVIL_CHECK(p.T >= 1 && p.B >= 1 && p.I >= 1 && p.H >= 1, "lstm ref", "empty problem ", p.repr());
  const bool bwd = p.pass == LstmPass::backward;
  if (p.dtype == DType::f64)
    bwd ? backward<double>(a) : forward<double>(a);
  else
    bwd ? backward<float>(a) : forward<float>(a);
}

}  // namespace

void register_lstm_ref() {
  lstm_table().add({
      .name = "ref",
      .supports =
          [](const LstmProblem& p) {
            if (p.dtype != DType::f32 && p.dtype != DType::f64)
              return Support::no(detail::str_cat("ref handles f32/f64, got ", dtype_name(p.dtype)));
            return Support::yes();
          },
      .fn = run_ref,
      .description = "per-step GEMMs through the gemm table, pointwise in double, direct backward",
  });
}

}  // namespace anvil::kernels
