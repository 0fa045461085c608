// SPDX-License-Identifier: Apache-2.0
// The differentiable Tensor member functions (views, conversions) and the autograd accessors
// declared in engine/core/tensor.h.
#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/views.h"
#include "engine/ops/reduce.h"

namespace anvil {
namespace {

// Records a single-input view/convert op whose backward is `bw(grad) -> grad of input`.
template <typename Backward>
Tensor unary_recorded(const char* name, const Tensor& in, Tensor out, Backward bw) {
  if (any_requires_grad({&in}))
    record(name, {in}, {out},
           [bw](const std::vector<Tensor>& g) { return std::vector<Tensor>{bw(g[0])}; });
  return out;
}

}  // namespace

Tensor Tensor::transpose(std::int64_t d0, std::int64_t d1) const {
  return unary_recorded("TransposeBackward", *this, raw::transpose(*this, d0, d1),
                        [d0, d1](const Tensor& g) { return raw::transpose(g, d0, d1); });
}

Tensor Tensor::t() const {
  ANVIL_CHECK(dim() == 2, "Tensor::t", "expected a 2-D tensor, got ", shape_str(sizes()));
  return transpose(0, 1);
}

Tensor Tensor::permute(const Shape& order) const {
  Tensor out = raw::permute(*this, order);
  Shape inverse(order.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    inverse[wrap_dim(order[i], dim(), "permute")] = static_cast<std::int64_t>(i);
  return unary_recorded("PermuteBackward", *this, out,
                        [inverse](const Tensor& g) { return raw::permute(g, inverse); });
}

Tensor Tensor::reshape(const Shape& shape) const {
  const Shape in_shape = sizes();
  return unary_recorded("ReshapeBackward", *this, raw::reshape(*this, shape),
                        [in_shape](const Tensor& g) { return raw::reshape(g, in_shape); });
}

Tensor Tensor::view(const Shape& shape) const {
  const Shape in_shape = sizes();
  return unary_recorded("ViewBackward", *this, raw::view(*this, shape),
                        [in_shape](const Tensor& g) { return raw::reshape(g, in_shape); });
}

Tensor Tensor::flatten(std::int64_t start_dim, std::int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const auto s = wrap_dim(start_dim, dim(), "flatten"), e = wrap_dim(end_dim, dim(), "flatten");
  ANVIL_CHECK(s <= e, "flatten", "start_dim ", start_dim, " is after end_dim ", end_dim);
  Shape shape;
  for (std::int64_t d = 0; d < s; ++d) shape.push_back(sizes()[d]);
  std::int64_t n = 1;
  for (std::int64_t d = s; d <= e; ++d) n *= sizes()[d];
  shape.push_back(n);
  for (std::int64_t d = e + 1; d < dim(); ++d) shape.push_back(sizes()[d]);
  return reshape(shape);
}

Tensor Tensor::unsqueeze(std::int64_t d) const { return reshape(raw::unsqueeze(*this, d).sizes()); }
Tensor Tensor::squeeze(std::int64_t d) const { return reshape(raw::squeeze(*this, d).sizes()); }

// Slices and selections scatter their gradient into zeros of the input's shape.
Tensor Tensor::slice(std::int64_t d, std::int64_t start, std::int64_t end,
                     std::int64_t step) const {
  const Shape in_shape = sizes();
  const DType dt = dtype();
  const Device dev = device();
  return unary_recorded("SliceBackward", *this, raw::slice(*this, d, start, end, step),
                        [=](const Tensor& g) {
                          Tensor full = Tensor::zeros(in_shape, dt, dev);
                          raw::slice(full, d, start, end, step).copy_(g);
                          return full;
                        });
}

Tensor Tensor::select(std::int64_t d, std::int64_t index) const {
  const Shape in_shape = sizes();
  const DType dt = dtype();
  const Device dev = device();
  return unary_recorded("SelectBackward", *this, raw::select(*this, d, index),
                        [=](const Tensor& g) {
                          Tensor full = Tensor::zeros(in_shape, dt, dev);
                          raw::select(full, d, index).copy_(g);
                          return full;
                        });
}

Tensor Tensor::expand(const Shape& shape) const {
  const Shape in_shape = sizes();
  return unary_recorded("ExpandBackward", *this, raw::expand(*this, shape),
                        [in_shape](const Tensor& g) { return ops::sum_to(g, in_shape); });
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return unary_recorded("ContiguousBackward", *this, raw::contiguous(*this),
                        [](const Tensor& g) { return g; });
}

Tensor Tensor::clone() const {
  return unary_recorded("CloneBackward", *this, raw::clone(*this),
                        [](const Tensor& g) { return g; });
}

Tensor Tensor::to(DType dt) const {
  if (dt == dtype()) return *this;
  const DType from = dtype();
  return unary_recorded("ToDTypeBackward", *this, raw::to_dtype(*this, dt),
                        [from](const Tensor& g) { return raw::to_dtype(g, from); });
}

Tensor Tensor::to(Device dev) const {
  if (dev == device()) return *this;
  const Device from = device();
  return unary_recorded("ToDeviceBackward", *this, raw::to_device(*this, dev),
                        [from](const Tensor& g) { return raw::to_device(g, from); });
}

// ---- autograd accessors --------------------------------------------------------------------

bool Tensor::requires_grad() const {
  const AutogradMeta* m = autograd_meta(*this);
  return m != nullptr && (m->requires_grad || m->grad_fn != nullptr);
}

Tensor& Tensor::set_requires_grad(bool on) {
  ANVIL_CHECK(is_leaf(), "Tensor::set_requires_grad",
              "only leaf tensors can be marked; this one "
              "was computed by ",
              autograd_meta(*this)->grad_fn->name());
  ANVIL_CHECK(!on || is_floating(dtype()), "Tensor::set_requires_grad",
              "only floating-point tensors can require grad, got ", dtype_name(dtype()));
  ensure_autograd_meta(*this).requires_grad = on;
  return *this;
}

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  const AutogradMeta* m = autograd_meta(*this);
  return m ? m->grad : undefined;
}

Tensor& Tensor::mutable_grad() { return ensure_autograd_meta(*this).grad; }

bool Tensor::is_leaf() const {
  const AutogradMeta* m = autograd_meta(*this);
  return m == nullptr || m->grad_fn == nullptr;
}

Tensor Tensor::detach() const { return raw::detach(*this); }

void Tensor::backward(const Tensor& grad_output, bool retain_graph) const {
  Tensor seed = grad_output;
  if (!seed.defined()) {
    ANVIL_CHECK(numel() == 1, "backward",
                "grad_output may be omitted only for a one-element "
                "tensor; this one is ",
                shape_str(sizes()));
    seed = Tensor::ones(sizes(), dtype(), device());
  } else {
    ANVIL_CHECK(seed.sizes() == sizes(), "backward", "grad_output shape ", shape_str(seed.sizes()),
                " differs from the tensor's ", shape_str(sizes()));
  }
  run_backward({*this}, {seed}, retain_graph);
}

}  // namespace anvil
