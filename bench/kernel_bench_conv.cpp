// SPDX-License-Identifier: Apache-2.0
// kernel/conv2d/<variant>/<forward|backward_data|backward_weights>/<model>:<layer>/threads:<t>
// (Note [Kernel benchmarks] in kernel_bench.cpp). The pass runs as the op layer runs it
// (engine/ops/conv.cpp): the variant is selected (default) or named (forced) for the plain
// problem and called through the conv2d table on dense buffers; a forward with the layer's fused
// relu runs fused when that variant supports it, else followed by a separate relu.
//
// Validation: 48 sampled entries of the pass's output (always including the first and the last)
// are recomputed in double from the definition in conv_problem.h, plus 8 entries of db for a
// backward_weights pass with bias; bound 1e-5 x sum|terms| + 1e-6 (x10 for winograd, whose
// transforms lose a few more bits, as tol_scale in tests/test_conv.cpp).
#include <cmath>
#include <memory>
#include <random>

#include "bench/bench_support.h"
#include "bench/conv_reference.h"
#include "bench/kernel_bench.h"
#include "anvil/anvil.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/ops/elementwise.h"

namespace anvil::bench::kernel {

ConvBuffers& buffers_for(const std::string& id, const ConvProblem& p) {
  static ConvBuffers cur;
  if (cur.id == id) return cur;
  cur = ConvBuffers{};  // free the previous problem's buffers first
  const Shape xs{p.n, p.c, p.h, p.w}, ws{p.k, p.c_per_group(), p.r, p.s},
      ys{p.n, p.k, p.p(), p.q()};
  switch (p.pass) {
    case ConvPass::forward:
      cur.x = random_f32(xs, 1);
      cur.w = random_f32(ws, 2);
      if (p.has_bias) cur.b = random_f32({p.k}, 3);
      cur.out = Tensor::empty(ys);
      break;
    case ConvPass::backward_data:
      cur.w = random_f32(ws, 2);
      cur.dy = random_f32(ys, 4);
      cur.out = Tensor::empty(xs);
      break;
    case ConvPass::backward_weights:
      cur.x = random_f32(xs, 1);
      cur.dy = random_f32(ys, 4);
      cur.out = Tensor::empty(ws);
      if (p.has_bias) cur.out_db = Tensor::empty({p.k});
      break;
  }
  cur.id = id;
  return cur;
}

namespace {

struct Sum {
  double value = 0, mag = 0;
  void add(double a, double b) {
    value += a * b;
    mag += std::abs(a * b);
  }
};

// One entry of the pass's output from the definition, in double.
Sum reference_entry(const ConvProblem& p, const ConvBuffers& buf, std::int64_t flat) {
  const std::int64_t P = p.p(), Q = p.q(), cpg = p.c_per_group(), kpg = p.k_per_group();
  Sum s;
  auto xat = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) -> double {
    return buf.x.data<float>()[((n * p.c + c) * p.h + h) * p.w + w];
  };
  auto wat = [&](std::int64_t k, std::int64_t c, std::int64_t r, std::int64_t t) -> double {
    return buf.w.data<float>()[((k * cpg + c) * p.r + r) * p.s + t];
  };
  auto dyat = [&](std::int64_t n, std::int64_t k, std::int64_t i, std::int64_t j) -> double {
    return buf.dy.data<float>()[((n * p.k + k) * P + i) * Q + j];
  };
  switch (p.pass) {
    case ConvPass::forward: {
      const std::int64_t q = flat % Q, pp = flat / Q % P, k = flat / (Q * P) % p.k,
                         n = flat / (Q * P * p.k);
      const std::int64_t g = k / kpg;
      for (std::int64_t c = 0; c < cpg; ++c)
        for (std::int64_t r = 0; r < p.r; ++r) {
          const std::int64_t h = pp * p.stride_h - p.pad_h + r * p.dil_h;
          if (h < 0 || h >= p.h) continue;
          for (std::int64_t t = 0; t < p.s; ++t) {
            const std::int64_t w = q * p.stride_w - p.pad_w + t * p.dil_w;
            if (w < 0 || w >= p.w) continue;
            s.add(xat(n, g * cpg + c, h, w), wat(k, c, r, t));
          }
        }
      if (p.has_bias) s.add(buf.b.data<float>()[k], 1.0);
      if (p.fuse_relu) s.value = std::max(s.value, 0.0);
      break;
    }
    case ConvPass::backward_data: {
      const std::int64_t w = flat % p.w, h = flat / p.w % p.h, c = flat / (p.w * p.h) % p.c,
                         n = flat / (p.w * p.h * p.c);
      const std::int64_t g = c / cpg;
      for (std::int64_t k = g * kpg; k < (g + 1) * kpg; ++k)
        for (std::int64_t r = 0; r < p.r; ++r) {
          const std::int64_t hh = h + p.pad_h - r * p.dil_h;
          if (hh < 0 || hh % p.stride_h != 0 || hh / p.stride_h >= P) continue;
          for (std::int64_t t = 0; t < p.s; ++t) {
            const std::int64_t ww = w + p.pad_w - t * p.dil_w;
            if (ww < 0 || ww % p.stride_w != 0 || ww / p.stride_w >= Q) continue;
            s.add(dyat(n, k, hh / p.stride_h, ww / p.stride_w), wat(k, c - g * cpg, r, t));
          }
        }
      break;
    }
    case ConvPass::backward_weights: {
      const std::int64_t t = flat % p.s, r = flat / p.s % p.r, c = flat / (p.s * p.r) % cpg,
                         k = flat / (p.s * p.r * cpg);
      const std::int64_t g = k / kpg;
      for (std::int64_t n = 0; n < p.n; ++n)
        for (std::int64_t i = 0; i < P; ++i) {
          const std::int64_t h = i * p.stride_h - p.pad_h + r * p.dil_h;
          if (h < 0 || h >= p.h) continue;
          for (std::int64_t j = 0; j < Q; ++j) {
            const std::int64_t w = j * p.stride_w - p.pad_w + t * p.dil_w;
            if (w < 0 || w >= p.w) continue;
            s.add(dyat(n, k, i, j), xat(n, g * cpg + c, h, w));
          }
        }
      break;
    }
  }
  return s;
}

const char* output_name(ConvPass pass) {
  return pass == ConvPass::forward ? "y" : pass == ConvPass::backward_data ? "dx" : "dw";
}

}  // namespace

std::string sampled_mismatch(const ConvProblem& p, const ConvBuffers& buf, double scale,
                             int samples) {
  const float* got = buf.out.data<float>();
  const std::int64_t n = buf.out.numel();
  std::mt19937_64 rng(7);
  for (int i = 0; i < samples; ++i) {
    const std::int64_t flat = i == 0 ? 0 : i == 1 ? n - 1 : static_cast<std::int64_t>(rng() % n);
    const Sum ref = reference_entry(p, buf, flat);
    const double bound = scale * 1e-5 * ref.mag + 1e-6;
    if (!(std::abs(got[flat] - ref.value) <= bound))
      return detail::str_cat(output_name(p.pass), "[flat ", flat, " of ",
                             shape_str(buf.out.sizes()), "] = ", got[flat],
                             " but ref = ", ref.value, " (bound ", bound, ")");
  }
  if (p.pass == ConvPass::backward_weights && p.has_bias) {
    const std::int64_t per_k = p.p() * p.q();
    for (int i = 0; i < 8; ++i) {
      const std::int64_t k = i == 0 ? p.k - 1 : static_cast<std::int64_t>(rng() % p.k);
      Sum ref;
      for (std::int64_t b = 0; b < p.n; ++b)
        for (std::int64_t j = 0; j < per_k; ++j)
          ref.add(buf.dy.data<float>()[(b * p.k + k) * per_k + j], 1.0);
      const double got_db = buf.out_db.data<float>()[k];
      const double bound = scale * 1e-5 * ref.mag + 1e-6;
      if (!(std::abs(got_db - ref.value) <= bound))
        return detail::str_cat("db[", k, "] = ", got_db, " but ref = ", ref.value, " (bound ",
                               bound, ")");
    }
  }
  return {};
}

namespace {

void run_conv(benchmark::State& state, const Case& c, ConvPass pass, const std::string& variant,
              int threads) {
  try {
    set_num_threads(threads);
    ConvProblem p = std::get<ConvProblem>(c.problem);
    p.pass = pass;
    if (pass != ConvPass::forward) p.fuse_relu = false;  // the backward passes never fuse
    ConvProblem plain = p;
    plain.fuse_relu = false;
    const ConvTable::Variant* v = nullptr;
    if (variant == "default") {
      v = &conv_table().select(plain);
    } else {
      const std::string why = unsupported(conv_table(), variant, plain);
      if (!why.empty()) {
        state.SkipWithError(why.c_str());
        return;
      }
      v = conv_table().find(variant);
    }
    const bool fused = p.fuse_relu && (!v->supports || v->supports(p).ok);
    const ConvProblem run_p = p.fuse_relu && !fused ? plain : p;
    ConvBuffers& buf = buffers_for(c.model + ":" + c.layer + "|" + conv_pass_name(pass), p);
    ConvArgs a;
    a.problem = run_p;
    a.x = buf.x.defined() ? buf.x.data_ptr() : nullptr;
    a.w = buf.w.defined() ? buf.w.data_ptr() : nullptr;
    a.b = buf.b.defined() ? buf.b.data_ptr() : nullptr;
    a.dy = buf.dy.defined() ? buf.dy.data_ptr() : nullptr;
    (pass == ConvPass::forward         ? a.y
     : pass == ConvPass::backward_data ? a.dx
                                       : a.dw) = buf.out.data_ptr();
    a.db = buf.out_db.defined() ? buf.out_db.data_ptr() : nullptr;
    const bool separate_relu = p.fuse_relu && !fused;
    auto step = [&] {
      v->fn(a);
      if (separate_relu) ops::unary_into(EwOp::relu, buf.out, buf.out);
    };
    state.SetLabel(v->name + (separate_relu ? " (relu not fused)" : ""));
    fill_nan(buf.out);
    if (buf.out_db.defined()) fill_nan(buf.out_db);
    step();  // warm-up (primitive creation, reorders, page faults) and the call validated
    const double scale = v->name.find("winograd") != std::string::npos ? 10.0 : 1.0;
    const std::string bad = validating() ? sampled_mismatch(p, buf, scale) : std::string();
    if (!bad.empty()) {
      state.SkipWithError(
          ("validation against the double-precision definition failed: " + bad).c_str());
      return;
    }
    timed_loop(state, step, p.flops(), p.bytes(), threads);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace

void register_conv(const Case& c) {
  const auto variants = variants_of(conv_table());
  for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights}) {
    if (c.only_its_pass && pass != std::get<ConvProblem>(c.problem).pass) continue;
    for (int t : options().threads)
      for (const auto& variant : variants)
        add(c, variant, conv_pass_name(pass), t,
            [=](benchmark::State& st) { run_conv(st, c, pass, variant, t); });
  }
}

}  // namespace anvil::bench::kernel
