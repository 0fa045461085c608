// SPDX-License-Identifier: Apache-2.0
// Raw views (engine/core/views.h): geometry only, storage shared, no autograd.
#include "engine/core/views.h"

#include <algorithm>

namespace anvil::raw {

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, std::int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

Tensor detach(const Tensor& t) { return make_view(t, t.sizes(), t.strides(), t.offset()); }

Tensor transpose(const Tensor& t, std::int64_t d0, std::int64_t d1) {
  d0 = wrap_dim(d0, t.dim(), "transpose");
  d1 = wrap_dim(d1, t.dim(), "transpose");
  Shape sz = t.sizes(), st = t.strides();
  std::swap(sz[d0], sz[d1]);
  std::swap(st[d0], st[d1]);
  return make_view(t, std::move(sz), std::move(st), t.offset());
}

Tensor permute(const Tensor& t, const Shape& order) {
  ANVIL_CHECK(static_cast<std::int64_t>(order.size()) == t.dim(), "permute", "order ",
              shape_str(order), " has ", order.size(), " entries but tensor is ", t.dim(), "-D");
  Shape sz(order.size()), st(order.size());
  std::vector<bool> seen(order.size(), false);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto d = wrap_dim(order[i], t.dim(), "permute");
    ANVIL_CHECK(!seen[d], "permute", "dimension ", d, " repeated in order ", shape_str(order));
    seen[d] = true;
    sz[i] = t.sizes()[d];
    st[i] = t.strides()[d];
  }
  return make_view(t, std::move(sz), std::move(st), t.offset());
}

Shape infer_shape(const Shape& shape, std::int64_t numel, const char* where) {
  Shape out = shape;
  std::int64_t known = 1, infer_at = -1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      ANVIL_CHECK(infer_at < 0, where, "more than one -1 in shape ", shape_str(shape));
      infer_at = static_cast<std::int64_t>(i);
    } else {
      ANVIL_CHECK(out[i] >= 0, where, "negative size in shape ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    ANVIL_CHECK(known != 0 && numel % known == 0, where, "cannot infer -1 in shape ",
                shape_str(shape), " for ", numel, " elements");
    out[infer_at] = numel / known;
    known *= out[infer_at];
  }
  ANVIL_CHECK(known == numel, where, "shape ", shape_str(shape), " has ", known,
              " elements but the tensor has ", numel);
  return out;
}

// Finds strides for `shape` over t's memory. Old dimensions are grouped, from the innermost
// outwards, into chunks that are contiguous among themselves; each chunk must be covered by a
// run of new dimensions with the same element count, which then get strides inside the chunk.
Tensor try_view(const Tensor& t, const Shape& shape_in) {
  const Shape shape = infer_shape(shape_in, t.numel(), "view");
  if (t.is_contiguous() || t.numel() == 0)
    return make_view(t, shape, contiguous_strides(shape), t.offset());
  const Shape& osz = t.sizes();
  const Shape& ost = t.strides();
  Shape nst(shape.size(), 1);
  auto nd = static_cast<std::int64_t>(shape.size()) - 1;  // next new dim to assign
  std::int64_t base = ost.back(), chunk_numel = 1, new_numel = 1;
  for (auto od = static_cast<std::int64_t>(osz.size()) - 1; od >= 0; --od) {
    chunk_numel *= osz[od];
    const bool chunk_ends = od == 0 || (osz[od - 1] != 1 && ost[od - 1] != chunk_numel * base);
    if (!chunk_ends) continue;
    while (nd >= 0 && (new_numel < chunk_numel || shape[nd] == 1)) {
      nst[nd] = new_numel * base;
      new_numel *= shape[nd];
      --nd;
    }
    if (new_numel != chunk_numel) return Tensor();
    if (od > 0) {
      base = ost[od - 1];
      chunk_numel = 1;
      new_numel = 1;
    }
  }
  if (nd != -1) return Tensor();
  return make_view(t, shape, nst, t.offset());
}

Tensor view(const Tensor& t, const Shape& shape) {
  Tensor v = try_view(t, shape);
  ANVIL_CHECK(v.defined(), "view", "cannot view a tensor of shape ", shape_str(t.sizes()),
              " with strides ", shape_str(t.strides()), " as ", shape_str(shape),
              "; use reshape() (it copies)");
  return v;
}

Tensor reshape(const Tensor& t, const Shape& shape) {
  Tensor v = try_view(t, shape);
  return v.defined() ? v : try_view(contiguous(t), shape);
}

Tensor slice(const Tensor& t, std::int64_t dim, std::int64_t start, std::int64_t end,
             std::int64_t step) {
  dim = wrap_dim(dim, t.dim(), "slice");
  ANVIL_CHECK(step > 0, "slice", "step must be positive, got ", step);
  const std::int64_t n = t.sizes()[dim];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<std::int64_t>(start, 0, n);
  end = std::clamp<std::int64_t>(end, start, n);
  Shape sz = t.sizes(), st = t.strides();
  sz[dim] = (end - start + step - 1) / step;
  st[dim] *= step;
  return make_view(t, std::move(sz), std::move(st), t.offset() + start * t.strides()[dim]);
}

Tensor select(const Tensor& t, std::int64_t dim, std::int64_t index) {
  dim = wrap_dim(dim, t.dim(), "select");
  const std::int64_t n = t.sizes()[dim];
  ANVIL_CHECK(index >= -n && index < n, "select", "index ", index, " out of range for dimension ",
              dim, " of size ", n);
  if (index < 0) index += n;
  Shape sz = t.sizes(), st = t.strides();
  const std::int64_t off = t.offset() + index * st[dim];
  sz.erase(sz.begin() + dim);
  st.erase(st.begin() + dim);
  return make_view(t, std::move(sz), std::move(st), off);
}

Tensor expand(const Tensor& t, const Shape& shape) {
  const auto nd = static_cast<std::int64_t>(shape.size());
  ANVIL_CHECK(nd >= t.dim(), "expand", "cannot expand ", shape_str(t.sizes()), " to fewer dims ",
              shape_str(shape));
  Shape st(nd, 0);
  for (std::int64_t i = 0; i < nd; ++i) {
    const std::int64_t j = i - (nd - t.dim());  // aligned source dim
    if (j < 0) continue;                        // new leading dim: stride 0
    const std::int64_t s = t.sizes()[j];
    if (s == shape[i])
      st[i] = t.strides()[j];
    else
      ANVIL_CHECK(s == 1, "expand", "cannot expand ", shape_str(t.sizes()), " to ",
                  shape_str(shape), " (dimension ", j, " is ", s, ", not 1)");
  }
  return make_view(t, shape, std::move(st), t.offset());
}

Tensor unsqueeze(const Tensor& t, std::int64_t dim) {
  dim = wrap_dim(dim, t.dim() + 1, "unsqueeze");
  Shape sz = t.sizes(), st = t.strides();
  const std::int64_t s = dim < t.dim() ? st[dim] * sz[dim] : 1;
  sz.insert(sz.begin() + dim, 1);
  st.insert(st.begin() + dim, s);
  return make_view(t, std::move(sz), std::move(st), t.offset());
}

Tensor squeeze(const Tensor& t, std::int64_t dim) {
  dim = wrap_dim(dim, t.dim(), "squeeze");
  ANVIL_CHECK(t.sizes()[dim] == 1, "squeeze", "dimension ", dim, " has size ", t.sizes()[dim],
              ", not 1");
  Shape sz = t.sizes(), st = t.strides();
  sz.erase(sz.begin() + dim);
  st.erase(st.begin() + dim);
  return make_view(t, std::move(sz), std::move(st), t.offset());
}

Tensor contiguous(const Tensor& t) { return t.is_contiguous() ? detach(t) : clone(t); }

Tensor clone(const Tensor& t) {
  Tensor out = Tensor::empty(t.sizes(), t.dtype(), t.device());
  out.copy_(t);
  return out;
}

Tensor to_dtype(const Tensor& t, DType dtype) {
  if (dtype == t.dtype()) return detach(t);
  Tensor out = Tensor::empty(t.sizes(), dtype, t.device());
  out.copy_(t);
  return out;
}

Tensor to_device(const Tensor& t, Device device) {
  if (device == t.device()) return detach(t);
  Tensor out = Tensor::empty(t.sizes(), t.dtype(), device);
  out.copy_(t);
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* where) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    ANVIL_CHECK(x == y || x == 1 || y == 1, where, "shapes ", shape_str(a), " and ", shape_str(b),
                " cannot be broadcast (dimension ", i, ": ", x, " vs ", y, ")");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

}  // namespace anvil::raw
