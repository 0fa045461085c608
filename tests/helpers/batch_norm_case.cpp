// SPDX-License-Identifier: Apache-2.0
// batch_norm_passes (tests/helpers/batch_norm_case.h).
#include "helpers/batch_norm_case.h"

#include "engine/core/views.h"
#include "engine/ops/batch_norm.h"

namespace anvil::test {

BnOutputs batch_norm_passes(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rm0,
                            const Tensor& rv0, const Tensor& dy, Device dev, bool eval_backward) {
  auto to = [&](const Tensor& t) { return raw::to_device(t, dev); };
  BnOutputs o;
  const Tensor xd = to(x), dyd = to(dy), wd = to(w), bd = to(b);
  o.rm = to(rm0).clone();
  o.rv = to(rv0).clone();
  const auto tr = ops::batch_norm2d_forward(xd, wd, bd, o.rm, o.rv, true, 0.1, 1e-5);
  o.y = tr.y;
  o.mean = tr.mean;
  o.var = tr.var;
  const auto g = ops::batch_norm2d_backward(dyd, xd, wd, tr);
  o.dx = g.dx;
  o.dw = g.dweight;
  o.db = g.dbias;
  const auto ev = ops::batch_norm2d_forward(xd, wd, bd, to(rm0), to(rv0), false, 0.1, 1e-5);
  o.y_eval = ev.y;
  if (eval_backward) {
    const auto ge = ops::batch_norm2d_backward(dyd, xd, wd, ev);
    o.dx_eval = ge.dx;
    o.dw_eval = ge.dweight;
    o.db_eval = ge.dbias;
  }
  return o;
}

}  // namespace anvil::test
