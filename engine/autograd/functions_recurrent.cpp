// SPDX-License-Identifier: Apache-2.0
// embedding and lstm_layer with their backward passes.
//
// Note [LSTM ref variant]
// The `ref` variant of the "lstm" table is not a kernel: it is the LSTM written as a
// composition of differentiable ops per time step (linear, slice, sigmoid, tanh, mul, add),
// with the backward derived by autograd. It is obviously correct, slow (dozens of nodes per
// step) and the yardstick every other variant is tested against. Any other variant runs its
// own forward and backward kernels under ONE autograd node per layer call ("LstmBackward"),
// holding the variant's saved state (Note [LSTM saved state]).
#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/views.h"
#include "engine/ops/lstm.h"

namespace anvil {
namespace {
using Grads = std::vector<Tensor>;

// Differentiable stack of equally shaped tensors along a new dim 0 (for the ref LSTM's y).
Tensor stack0(const std::vector<Tensor>& xs) {
  Shape shape = xs.front().sizes();
  shape.insert(shape.begin(), static_cast<std::int64_t>(xs.size()));
  Tensor out = Tensor::empty(shape, xs.front().dtype(), xs.front().device());
  for (std::size_t i = 0; i < xs.size(); ++i)
    raw::select(out, 0, static_cast<std::int64_t>(i)).copy_(xs[i].detach());
  if (any_requires_grad(xs)) {
    const std::int64_t n = static_cast<std::int64_t>(xs.size());
    record("StackBackward", xs, {out}, [n](const Grads& g) {
      Grads r;
      for (std::int64_t i = 0; i < n; ++i) r.push_back(raw::contiguous(raw::select(g[0], 0, i)));
      return r;
    });
  }
  return out;
}

LstmLayerOutput lstm_ref(const ops::LstmInputs& in, const LstmProblem& p) {
  Tensor h = in.h0.defined() ? in.h0 : Tensor::zeros({p.B, p.H}, p.dtype, in.x.device());
  Tensor c = in.c0.defined() ? in.c0 : Tensor::zeros({p.B, p.H}, p.dtype, in.x.device());
  const std::int64_t H = p.H;
  std::vector<Tensor> ys;
  for (std::int64_t t = 0; t < p.T; ++t) {
    Tensor gates = linear(in.x.select(0, t), in.w_ih, in.b_ih) + linear(h, in.w_hh, in.b_hh);
    Tensor i = sigmoid(gates.slice(1, 0, H));
    Tensor f = sigmoid(gates.slice(1, H, 2 * H));
    Tensor g = tanh(gates.slice(1, 2 * H, 3 * H));
    Tensor o = sigmoid(gates.slice(1, 3 * H, 4 * H));
    c = f * c + i * g;
    h = o * tanh(c);
    ys.push_back(h);
  }
  return {stack0(ys), h, c};
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  Tensor out = ops::embedding(weight, ids);
  if (any_requires_grad({&weight})) {
    const Tensor idd = ids.detach();
    const std::int64_t rows = weight.sizes()[0];
    record("EmbeddingBackward", {weight}, {out},
           [idd, rows](const Grads& g) { return Grads{ops::embedding_backward(g[0], idd, rows)}; });
  }
  return out;
}

LstmLayerOutput lstm_layer(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih,
                           const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh) {
  const ops::LstmInputs in{x, h0, c0, w_ih, w_hh, b_ih, b_hh};
  const bool need_grad = any_requires_grad({&x, &h0, &c0, &w_ih, &w_hh, &b_ih, &b_hh});
  const LstmProblem p = ops::lstm_problem_for(
      in, need_grad ? LstmPass::forward_training : LstmPass::forward_inference);
  const LstmTable::Variant& v = ops::select_lstm_variant(p, &in);
  if (v.name == "ref") return lstm_ref(in, p);  // Note [LSTM ref variant]
  if (need_grad) {
    LstmProblem pb = p;
    pb.pass = LstmPass::backward;
    if (v.supports) {
      const Support s = v.supports(pb);
      ANVIL_CHECK(s.ok, "lstm_layer", "variant '", v.name, "' runs the forward of ", p.repr(),
                  " but not its backward: ", s.reason);
    }
  }
  ops::LstmForwardResult fwd = ops::lstm_forward(v, in, need_grad);
  LstmLayerOutput out{fwd.y, fwd.h_n, fwd.c_n};
  if (need_grad) {
    // Saved: detached inputs and outputs (no graph cycles) and the variant's own state.
    ops::LstmInputs saved_in{x.detach(),
                             h0.defined() ? h0.detach() : Tensor(),
                             c0.defined() ? c0.detach() : Tensor(),
                             w_ih.detach(),
                             w_hh.detach(),
                             b_ih.detach(),
                             b_hh.defined() ? b_hh.detach() : Tensor()};
    ops::LstmForwardResult saved_fwd{fwd.y.detach(), fwd.h_n.detach(), fwd.c_n.detach(), fwd.saved,
                                     fwd.variant};
    const LstmTable::Variant* vp = &v;
    const bool need_dx = x.requires_grad();
    record("LstmBackward", {x, h0, c0, w_ih, w_hh, b_ih, b_hh}, {out.y, out.h_n, out.c_n},
           [saved_in, saved_fwd, vp, need_dx](const Grads& g) {
             ops::LstmGrads r =
                 ops::lstm_backward(*vp, saved_in, saved_fwd, g[0], g[1], g[2], need_dx);
             return Grads{r.dx, r.dh0, r.dc0, r.dw_ih, r.dw_hh, r.db_ih, r.db_hh};
           });
  }
  return out;
}

}  // namespace anvil
