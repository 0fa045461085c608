// SPDX-License-Identifier: Apache-2.0
// Pointwise ops (engine/ops/elementwise.h): shape/dtype/device checks, then dispatch.
#include "engine/ops/elementwise.h"

#include "engine/core/views.h"

namespace anvil::ops {
namespace {

void check_operand(EwOp op, const Tensor& out, const Tensor& t, const char* name) {
  check_defined(t, ew_name(op), name);
  ANVIL_CHECK(t.dtype() == out.dtype(), ew_name(op), "dtype mismatch: ", name, " is ",
              dtype_name(t.dtype()), " but the output is ", dtype_name(out.dtype()));
  check_same_device(out, t, ew_name(op));
}

void run(EwOp op, const Tensor& out, const Tensor& a, const Tensor* b, double alpha,
         double scalar) {
  // bf16/f16 compute in f32 (Note [Elementwise in 16-bit storage]).
  ANVIL_CHECK(is_any_floating(out.dtype()) || ew_allows_integers(op), ew_name(op),
              "needs a floating-point tensor, got ", dtype_name(out.dtype()));
  check_operand(op, out, a, "input");
  const Tensor ea = raw::expand(a, out.sizes());
  Tensor eb;
  if (b) {
    check_operand(op, out, *b, "other");
    eb = raw::expand(*b, out.sizes());
  }
  ElementwiseArgs args;
  args.problem.op = op;
  args.problem.dtype = out.dtype();
  args.problem.device = out.device();
  args.problem.numel = out.numel();
  args.problem.contiguous = out.is_contiguous() && ea.is_contiguous() && ea.sizes() == a.sizes() &&
                            (!b || (eb.is_contiguous() && eb.sizes() == b->sizes()));
  args.sizes = out.sizes().data();
  args.ndim = static_cast<int>(out.dim());
  args.out = {out.data_ptr(), out.strides().data()};
  args.a = {ea.data_ptr(), ea.strides().data()};
  if (b) args.b = {eb.data_ptr(), eb.strides().data()};
  args.scalar = scalar;
  args.alpha = alpha;
  if (out.numel() == 0) return;
  elementwise_table().run(args);
}

}  // namespace

Tensor unary(EwOp op, const Tensor& a, double scalar) {
  check_defined(a, ew_name(op), "input");
  ANVIL_CHECK(ew_arity(op) == 1, ew_name(op), "is a binary op");
  Tensor out = Tensor::empty(a.sizes(), a.dtype(), a.device());
  run(op, out, a, nullptr, 1.0, scalar);
  return out;
}

Tensor binary(EwOp op, const Tensor& a, const Tensor& b, double alpha, double scalar) {
  check_defined(a, ew_name(op), "input");
  check_defined(b, ew_name(op), "other");
  ANVIL_CHECK(ew_arity(op) == 2, ew_name(op), "is a unary op");
  ANVIL_CHECK(a.dtype() == b.dtype(), ew_name(op), "dtype mismatch: ", dtype_name(a.dtype()),
              " vs ", dtype_name(b.dtype()), " (convert with .to(dtype))");
  Tensor out = Tensor::empty(raw::broadcast_shapes(a.sizes(), b.sizes(), ew_name(op)), a.dtype(),
                             a.device());
  run(op, out, a, &b, alpha, scalar);
  return out;
}

void binary_into(EwOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha,
                 double scalar) {
  check_defined(out, ew_name(op), "output");
  run(op, out, a, &b, alpha, scalar);
}

void unary_into(EwOp op, const Tensor& out, const Tensor& a, double scalar) {
  check_defined(out, ew_name(op), "output");
  run(op, out, a, nullptr, 1.0, scalar);
}

void add_(const Tensor& dst, const Tensor& src, double alpha) {
  binary_into(EwOp::add, dst, dst, src, alpha);
}

void mul_scalar_(const Tensor& dst, double s) { unary_into(EwOp::mul_scalar, dst, dst, s); }

}  // namespace anvil::ops
