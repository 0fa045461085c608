// SPDX-License-Identifier: Apache-2.0
// Pointwise differentiable functions and activations: forward via ops::unary/binary, backward
// beside each. Broadcast inputs get their gradient summed back to their shape (ops::sum_to).
#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"

namespace anvil {
namespace {

using Grads = std::vector<Tensor>;

// Gradient for an input of shape `shape` that was broadcast: undefined when not needed.

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = ops::add(a, b);
  if (any_requires_grad({&a, &b})) {
    const Shape& sa = a.sizes();
    const Shape& sb = b.sizes();
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    record("AddBackward", {a, b}, {out}, [sa, sb, ga, gb](const Grads& g) {
      return Grads{ga ? ops::sum_to(g[0], sa) : Tensor(), gb ? ops::sum_to(g[0], sb) : Tensor()};
    });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = ops::sub(a, b);
  if (any_requires_grad({&a, &b})) {
    const Shape& sa = a.sizes();
    const Shape& sb = b.sizes();
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    record("SubBackward", {a, b}, {out}, [sa, sb, ga, gb](const Grads& g) {
      return Grads{ga ? ops::sum_to(g[0], sa) : Tensor(),
                   gb ? ops::sum_to(ops::unary(EwOp::neg, g[0]), sb) : Tensor()};
    });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = ops::mul(a, b);
  if (any_requires_grad({&a, &b})) {
    const Tensor ad = a.detach(), bd = b.detach();
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    record("MulBackward", {a, b}, {out}, [ad, bd, ga, gb](const Grads& g) {
      return Grads{ga ? ops::sum_to(ops::mul(g[0], bd), ad.sizes()) : Tensor(),
                   gb ? ops::sum_to(ops::mul(g[0], ad), bd.sizes()) : Tensor()};
    });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = ops::div(a, b);
  if (any_requires_grad({&a, &b})) {
    const Tensor ad = a.detach(), bd = b.detach(), od = out.detach();
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    record("DivBackward", {a, b}, {out}, [ad, bd, od, ga, gb](const Grads& g) {
      // d(a/b)/da = 1/b;  d(a/b)/db = -a/b^2 = -out/b
      Tensor gb_t;
      if (gb)
        gb_t = ops::sum_to(ops::unary(EwOp::neg, ops::div(ops::mul(g[0], od), bd)), bd.sizes());
      return Grads{ga ? ops::sum_to(ops::div(g[0], bd), ad.sizes()) : Tensor(), gb_t};
    });
  }
  return out;
}

Tensor neg(const Tensor& x) {
  Tensor out = ops::unary(EwOp::neg, x);
  if (any_requires_grad({&x}))
    record("NegBackward", {x}, {out},
           [](const Grads& g) { return Grads{ops::unary(EwOp::neg, g[0])}; });
  return out;
}

Tensor exp(const Tensor& x) {
  Tensor out = ops::unary(EwOp::exp, x);
  if (any_requires_grad({&x})) {
    const Tensor od = out.detach();
    record("ExpBackward", {x}, {out}, [od](const Grads& g) { return Grads{ops::mul(g[0], od)}; });
  }
  return out;
}

Tensor log(const Tensor& x) {
  Tensor out = ops::unary(EwOp::log, x);
  if (any_requires_grad({&x})) {
    const Tensor xd = x.detach();
    record("LogBackward", {x}, {out}, [xd](const Grads& g) { return Grads{ops::div(g[0], xd)}; });
  }
  return out;
}

Tensor sqrt(const Tensor& x) {
  Tensor out = ops::unary(EwOp::sqrt, x);
  if (any_requires_grad({&x})) {
    const Tensor od = out.detach();
    record("SqrtBackward", {x}, {out},
           [od](const Grads& g) { return Grads{ops::mul_scalar(ops::div(g[0], od), 0.5)}; });
  }
  return out;
}

Tensor pow(const Tensor& x, double e) {
  Tensor out = ops::unary(EwOp::pow_scalar, x, e);
  if (any_requires_grad({&x})) {
    const Tensor xd = x.detach();
    record("PowBackward", {x}, {out}, [xd, e](const Grads& g) {
      return Grads{ops::binary(EwOp::pow_scalar_backward, xd, g[0], 1.0, e)};
    });
  }
  return out;
}

Tensor pow(const Tensor& x, const Tensor& e) {
  Tensor out = ops::binary(EwOp::pow, x, e);
  if (any_requires_grad({&x, &e})) {
    const Tensor xd = x.detach(), ed = e.detach(), od = out.detach();
    const bool gx = x.requires_grad(), ge = e.requires_grad();
    record("PowTensorBackward", {x, e}, {out}, [xd, ed, od, gx, ge](const Grads& g) {
      Tensor dx, de;
      // d/dx x^e = e * x^(e-1) = e * out / x ; d/de x^e = out * log(x)
      if (gx)
        dx = ops::sum_to(
            ops::mul(g[0], ops::mul(ed, ops::binary(EwOp::pow, xd, ops::add_scalar(ed, -1.0)))),
            xd.sizes());
      if (ge) de = ops::sum_to(ops::mul(g[0], ops::mul(od, ops::unary(EwOp::log, xd))), ed.sizes());
      return Grads{dx, de};
    });
  }
  return out;
}

Tensor add_scalar(const Tensor& x, double s) {
  Tensor out = ops::add_scalar(x, s);
  if (any_requires_grad({&x}))
    record("AddScalarBackward", {x}, {out}, [](const Grads& g) { return Grads{g[0]}; });
  return out;
}

Tensor mul_scalar(const Tensor& x, double s) {
  Tensor out = ops::mul_scalar(x, s);
  if (any_requires_grad({&x}))
    record("MulScalarBackward", {x}, {out},
           [s](const Grads& g) { return Grads{ops::mul_scalar(g[0], s)}; });
  return out;
}

static Tensor rsub_scalar(double s, const Tensor& x) { return add_scalar(neg(x), s); }
static Tensor rdiv_scalar(double s, const Tensor& x) {
  Tensor out = ops::unary(EwOp::rdiv_scalar, x, s);
  if (any_requires_grad({&x})) {
    const Tensor xd = x.detach(), od = out.detach();
    record("RDivScalarBackward", {x}, {out}, [xd, od](const Grads& g) {
      return Grads{ops::unary(EwOp::neg, ops::div(ops::mul(g[0], od), xd))};  // -s/x^2
    });
  }
  return out;
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, double s) { return add_scalar(a, s); }
Tensor operator-(const Tensor& a, double s) { return add_scalar(a, -s); }
Tensor operator*(const Tensor& a, double s) { return mul_scalar(a, s); }
Tensor operator/(const Tensor& a, double s) { return mul_scalar(a, 1.0 / s); }
Tensor operator+(double s, const Tensor& a) { return add_scalar(a, s); }
Tensor operator-(double s, const Tensor& a) { return rsub_scalar(s, a); }
Tensor operator*(double s, const Tensor& a) { return mul_scalar(a, s); }
Tensor operator/(double s, const Tensor& a) { return rdiv_scalar(s, a); }

// ---- activations: the backward uses the saved output (sigmoid, tanh) or input (relu) ------

Tensor sigmoid(const Tensor& x) {
  Tensor out = ops::unary(EwOp::sigmoid, x);
  if (any_requires_grad({&x})) {
    const Tensor od = out.detach();
    record("SigmoidBackward", {x}, {out},
           [od](const Grads& g) { return Grads{ops::binary(EwOp::sigmoid_backward, od, g[0])}; });
  }
  return out;
}

Tensor tanh(const Tensor& x) {
  Tensor out = ops::unary(EwOp::tanh, x);
  if (any_requires_grad({&x})) {
    const Tensor od = out.detach();
    record("TanhBackward", {x}, {out},
           [od](const Grads& g) { return Grads{ops::binary(EwOp::tanh_backward, od, g[0])}; });
  }
  return out;
}

Tensor relu(const Tensor& x) {
  Tensor out = ops::unary(EwOp::relu, x);
  if (any_requires_grad({&x})) {
    const Tensor od = out.detach();  // out > 0 exactly where x > 0
    record("ReluBackward", {x}, {out},
           [od](const Grads& g) { return Grads{ops::binary(EwOp::relu_backward, od, g[0])}; });
  }
  return out;
}

}  // namespace anvil
