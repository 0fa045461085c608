// SPDX-License-Identifier: Apache-2.0
// kernel/<max_pool2d|avg_pool2d|adaptive_avg_pool2d|batch_norm2d|lstm>/<variant>/<pass>/...
// (Note [Kernel benchmarks] in kernel_bench.cpp). These run through the op layer
// (engine/ops/{pool,batch_norm,lstm}.h) with the variant forced (ForceVariant, or the LSTM
// variant passed by name), as the autograd functions call them; outputs are allocated by the op
// layer on every call, as in a training step (the caching allocator makes that cheap).
//
// Passes: max pooling forward_training, backward (of that training forward), forward_inference;
// avg and adaptive-avg pooling forward_inference and backward (their training forward is the
// same computation); batch norm forward_training, backward, forward_inference (running
// statistics given); LSTM forward_training, backward, forward_inference.
//
// Validation (the full tensors; these references are cheap next to a convolution's):
//   pooling, batch norm: the table's `ref` variant on f64 copies of the same inputs;
//   LSTM: `ref` (anvil::lstm_layer with the LSTM table's per-step reference kernel, Note [LSTM
//         ref variant]) on f64 copies: y, h_n, c_n, and for backward every gradient of
//         sum(y * dy).
// Max-pooling inputs have no ties inside a window (distinct_f32), so every variant routes dy to
// the same entry as ref.
#include <cmath>
#include <memory>

#include "bench/bench_support.h"
#include "bench/kernel_bench.h"
#include "anvil/anvil.h"
#include "engine/dispatch/batch_norm_problem.h"
#include "engine/dispatch/lstm_problem.h"
#include "engine/dispatch/pool_problem.h"
#include "engine/ops/batch_norm.h"
#include "engine/ops/lstm.h"
#include "engine/ops/pool.h"

namespace anvil::bench::kernel {
namespace {

// Single-slot input cache shared by the benchmarks of one (problem, pass): consecutive variants
// and thread counts reuse the inputs; another (problem, pass) frees them first.
std::vector<Tensor>& inputs_for(const std::string& id,
                                const std::function<std::vector<Tensor>()>& make) {
  static std::string cur_id;
  static std::vector<Tensor> cur;
  if (cur_id != id) {
    cur.clear();
    cur_id.clear();
    cur = make();
    cur_id = id;
  }
  return cur;
}

Tensor f64(const Tensor& t) { return t.defined() ? t.to(DType::f64) : Tensor(); }

std::unique_ptr<ForceVariant> force_unless_default(const std::string& op,
                                                   const std::string& variant) {
  return variant == "default" ? nullptr : std::make_unique<ForceVariant>(op, variant);
}

// ---- pooling --------------------------------------------------------------------------------

void run_pool(benchmark::State& state, const Case& c, PoolPass pass, const std::string& variant,
              int threads) {
  try {
    set_num_threads(threads);
    const PoolProblem p0 = std::get<PoolProblem>(c.problem);
    PoolTable& table = pool_table(p0.kind);
    const bool training = pass != PoolPass::forward_inference;
    const PoolProblem pf =
        p0.with_pass(training ? PoolPass::forward_training : PoolPass::forward_inference);
    const PoolProblem pp = p0.with_pass(pass);
    if (variant != "default") {
      std::string why = unsupported(table, variant, pf);
      if (why.empty() && pass == PoolPass::backward) why = unsupported(table, variant, pp);
      if (!why.empty()) {
        state.SkipWithError(why.c_str());
        return;
      }
    }
    const auto force = force_unless_default(table.op(), variant);
    auto& in = inputs_for(c.model + ":" + c.layer + "|" + pool_pass_name(pass), [&] {
      std::vector<Tensor> v{distinct_f32({p0.n, p0.c, p0.h, p0.w}, 1)};
      if (pass == PoolPass::backward) v.push_back(random_f32({p0.n, p0.c, p0.oh, p0.ow}, 5));
      return v;
    });
    const Tensor& x = in[0];
    ops::PoolForward fwd = ops::pool2d_forward(x, p0, training);  // warm-up / validated call
    Tensor dx;
    if (pass == PoolPass::backward) dx = ops::pool2d_backward(in[1], fwd);
    state.SetLabel(pass == PoolPass::backward && p0.kind != PoolKind::max ? table.select(pp).name
                                                                          : fwd.variant);
    {
      ForceVariant ref(table.op(), "ref");
      PoolProblem p64 = p0;
      p64.dtype = DType::f64;
      const ops::PoolForward rf = ops::pool2d_forward(f64(x), p64, training);
      std::string bad = compare("y", fwd.y, rf.y, 1e-5, 1e-5);
      if (bad.empty() && pass == PoolPass::backward)
        bad = compare("dx", dx, ops::pool2d_backward(f64(in[1]), rf), 1e-5, 1e-5);
      if (!bad.empty()) {
        state.SkipWithError(("validation against ref in f64 failed: " + bad).c_str());
        return;
      }
    }
    std::function<void()> step;
    if (pass == PoolPass::backward)
      step = [&] { dx = ops::pool2d_backward(in[1], fwd); };
    else
      step = [&] { fwd = ops::pool2d_forward(x, p0, training); };
    timed_loop(state, step, pp.flops(), pp.bytes(), threads);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// ---- batch norm -----------------------------------------------------------------------------

void run_batch_norm(benchmark::State& state, const Case& c, BatchNormPass pass,
                    const std::string& variant, int threads) {
  try {
    set_num_threads(threads);
    const BatchNormProblem p0 = std::get<BatchNormProblem>(c.problem);
    const bool training = pass != BatchNormPass::forward_inference;
    const BatchNormProblem pf =
        p0.with_pass(training ? BatchNormPass::forward_training : BatchNormPass::forward_inference);
    const BatchNormProblem pp = p0.with_pass(pass);
    if (variant != "default") {
      std::string why = unsupported(batch_norm2d_table(), variant, pf);
      if (why.empty() && pass == BatchNormPass::backward)
        why = unsupported(batch_norm2d_table(), variant, pp);
      if (!why.empty()) {
        state.SkipWithError(why.c_str());
        return;
      }
    }
    const auto force = force_unless_default("batch_norm2d", variant);
    // x, weight, bias, running mean, running var, dy
    auto& in = inputs_for(c.model + ":" + c.layer + "|" + batch_norm_pass_name(pass), [&] {
      Generator gen(9);
      std::vector<Tensor> v{random_f32({p0.n, p0.c, p0.h, p0.w}, 1),
                            uniform({p0.c}, 0.5, 1.5, DType::f32, &gen),
                            uniform({p0.c}, -0.5, 0.5, DType::f32, &gen),
                            uniform({p0.c}, -0.1, 0.1, DType::f32, &gen),
                            uniform({p0.c}, 0.2, 0.5, DType::f32, &gen)};
      if (pass == BatchNormPass::backward) v.push_back(random_f32({p0.n, p0.c, p0.h, p0.w}, 5));
      return v;
    });
    // Training forwards update copies of the running statistics, never the cached inputs.
    const Tensor rm = in[3].clone(), rv = in[4].clone();
    auto forward = [&] {
      return ops::batch_norm2d_forward(in[0], in[1], in[2], rm, rv, training, p0.momentum, p0.eps);
    };
    ops::BatchNormForward fwd = forward();  // warm-up / validated call
    ops::BatchNormGrads g;
    if (pass == BatchNormPass::backward) g = ops::batch_norm2d_backward(in[5], in[0], in[1], fwd);
    state.SetLabel(batch_norm2d_table().select(pp).name);
    {
      ForceVariant ref("batch_norm2d", "ref");
      const ops::BatchNormForward rf =
          ops::batch_norm2d_forward(f64(in[0]), f64(in[1]), f64(in[2]), f64(in[3]), f64(in[4]),
                                    training, p0.momentum, p0.eps);
      std::string bad = compare("y", fwd.y, rf.y, 1e-4, 1e-4);
      if (bad.empty() && training) bad = compare("mean", fwd.mean, rf.mean, 1e-5, 1e-4);
      if (bad.empty() && training) bad = compare("var", fwd.var, rf.var, 1e-5, 1e-4);
      if (bad.empty() && pass == BatchNormPass::backward) {
        const ops::BatchNormGrads rg =
            ops::batch_norm2d_backward(f64(in[5]), f64(in[0]), f64(in[1]), rf);
        // dweight/dbias sum N*H*W products of magnitude <= ~2: f32 accumulation error grows with
        // it.
        const double sum_tol = 1e-6 * static_cast<double>(p0.per_channel()) + 1e-4;
        bad = compare("dx", g.dx, rg.dx, 1e-4, 1e-4);
        if (bad.empty()) bad = compare("dweight", g.dweight, rg.dweight, sum_tol, 1e-4);
        if (bad.empty()) bad = compare("dbias", g.dbias, rg.dbias, sum_tol, 1e-4);
      }
      if (!bad.empty()) {
        state.SkipWithError(("validation against ref in f64 failed: " + bad).c_str());
        return;
      }
    }
    std::function<void()> step;
    if (pass == BatchNormPass::backward)
      step = [&] { g = ops::batch_norm2d_backward(in[5], in[0], in[1], fwd); };
    else
      step = [&] { fwd = forward(); };
    timed_loop(state, step, pp.flops(), pp.bytes(), threads);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// ---- LSTM -----------------------------------------------------------------------------------

void run_lstm(benchmark::State& state, const Case& c, LstmPass pass, const std::string& variant,
              int threads) {
  try {
    set_num_threads(threads);
    LstmProblem p = std::get<LstmProblem>(c.problem);
    p.has_initial_state = false;
    const bool training = pass != LstmPass::forward_inference;
    LstmProblem pf = p, pp = p;
    pf.pass = training ? LstmPass::forward_training : LstmPass::forward_inference;
    pp.pass = pass;
    const LstmTable::Variant* v = nullptr;
    if (variant == "default") {
      v = &ops::select_lstm_variant(pf);
    } else {
      std::string why = unsupported(lstm_table(), variant, pf);
      if (why.empty() && pass == LstmPass::backward) why = unsupported(lstm_table(), variant, pp);
      if (!why.empty()) {
        state.SkipWithError(why.c_str());
        return;
      }
      v = lstm_table().find(variant);
    }
    // x, w_ih, w_hh, b_ih, b_hh (or undefined), dy
    auto& in = inputs_for(c.model + ":" + c.layer + "|" + lstm_pass_name(pass), [&] {
      Generator gen(11);
      const double k = 1.0 / std::sqrt(static_cast<double>(p.H));
      std::vector<Tensor> t{random_f32({p.T, p.B, p.I}, 1),
                            uniform({4 * p.H, p.I}, -k, k, DType::f32, &gen),
                            uniform({4 * p.H, p.H}, -k, k, DType::f32, &gen),
                            uniform({4 * p.H}, -k, k, DType::f32, &gen),
                            p.two_biases ? uniform({4 * p.H}, -k, k, DType::f32, &gen) : Tensor()};
      if (pass == LstmPass::backward) t.push_back(random_f32({p.T, p.B, p.H}, 5));
      return t;
    });
    const ops::LstmInputs li{in[0], Tensor(), Tensor(), in[1], in[2], in[3], in[4]};
    ops::LstmForwardResult fwd = ops::lstm_forward(*v, li, training);  // warm-up / validated call
    ops::LstmGrads g;
    if (pass == LstmPass::backward) g = ops::lstm_backward(*v, li, fwd, in[5], Tensor(), Tensor());
    state.SetLabel(v->name);
    {
      ForceVariant ref("lstm", "ref");
      std::vector<Tensor> r;  // f64 leaves: x, w_ih, w_hh, b_ih, b_hh
      for (int i = 0; i < 5; ++i) {
        r.push_back(f64(in[i]));
        if (r.back().defined() && pass == LstmPass::backward) r.back().set_requires_grad(true);
      }
      std::unique_ptr<NoGradGuard> no_grad;
      if (pass != LstmPass::backward) no_grad = std::make_unique<NoGradGuard>();
      const LstmLayerOutput ro = lstm_layer(r[0], Tensor(), Tensor(), r[1], r[2], r[3], r[4]);
      std::string bad = compare("y", fwd.y, ro.y, 1e-5, 1e-4);
      if (bad.empty()) bad = compare("h_n", fwd.h_n, ro.h_n, 1e-5, 1e-4);
      if (bad.empty()) bad = compare("c_n", fwd.c_n, ro.c_n, 1e-5, 1e-4);
      if (bad.empty() && pass == LstmPass::backward) {
        sum(ro.y * f64(in[5])).backward();
        // as tests/test_lstm.cpp: gradients sum over T*B contributions
        const double tol = 2e-5 * (1.0 + std::sqrt(static_cast<double>(p.T * p.B)));
        const Tensor* got[] = {&g.dx, &g.dw_ih, &g.dw_hh, &g.db_ih, &g.db_hh};
        const char* names[] = {"dx", "dw_ih", "dw_hh", "db_ih", "db_hh"};
        for (int i = 0; i < 5 && bad.empty(); ++i)
          if (r[i].defined()) bad = compare(names[i], *got[i], r[i].grad(), tol, 1e-4);
      }
      if (!bad.empty()) {
        state.SkipWithError(("validation against ref in f64 failed: " + bad).c_str());
        return;
      }
    }
    std::function<void()> step;
    if (pass == LstmPass::backward)
      step = [&] { g = ops::lstm_backward(*v, li, fwd, in[5], Tensor(), Tensor()); };
    else
      step = [&] { fwd = ops::lstm_forward(*v, li, training); };
    timed_loop(state, step, pp.flops(), pp.bytes(), threads);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace

void register_pool(const Case& c) {
  const PoolProblem& p = std::get<PoolProblem>(c.problem);
  const auto variants = variants_of(pool_table(p.kind));
  std::vector<PoolPass> passes{PoolPass::forward_inference, PoolPass::backward};
  if (p.kind == PoolKind::max) passes.insert(passes.begin(), PoolPass::forward_training);
  for (PoolPass pass : passes) {
    if (c.only_its_pass && pass != p.pass) continue;
    for (int t : options().threads)
      for (const auto& variant : variants)
        add(c, variant, pool_pass_name(pass), t,
            [=](benchmark::State& st) { run_pool(st, c, pass, variant, t); });
  }
}

void register_batch_norm(const Case& c) {
  const auto variants = variants_of(batch_norm2d_table());
  for (BatchNormPass pass : {BatchNormPass::forward_training, BatchNormPass::backward,
                             BatchNormPass::forward_inference}) {
    if (c.only_its_pass && pass != std::get<BatchNormProblem>(c.problem).pass) continue;
    for (int t : options().threads)
      for (const auto& variant : variants)
        add(c, variant, batch_norm_pass_name(pass), t,
            [=](benchmark::State& st) { run_batch_norm(st, c, pass, variant, t); });
  }
}

void register_lstm(const Case& c) {
  const auto variants = variants_of(lstm_table());
  for (LstmPass pass :
       {LstmPass::forward_training, LstmPass::backward, LstmPass::forward_inference}) {
    if (c.only_its_pass && pass != std::get<LstmProblem>(c.problem).pass) continue;
    for (int t : options().threads)
      for (const auto& variant : variants)
        add(c, variant, lstm_pass_name(pass), t,
            [=](benchmark::State& st) { run_lstm(st, c, pass, variant, t); });
  }
}

}  // namespace anvil::bench::kernel
