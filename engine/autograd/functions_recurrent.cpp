// SPDX-License-Identifier: Apache-2.0
// embedding and lstm_layer with their backward passes.
//
// Every variant of the "lstm" table, `ref` included (kernels/cpu/ref/lstm_ref.cpp), runs its own
// forward and backward kernels under ONE autograd node per layer call ("LstmBackward"), holding
// the variant's saved state (Note [LSTM saved state]). Nothing here depends on which variant
// the table selected.
#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/views.h"
#include "engine/ops/lstm.h"

namespace anvil {
namespace {
using Grads = std::vector<Tensor>;

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
