// SPDX-License-Identifier: Apache-2.0
#pragma once
// Raw views and copies: new TensorImpls over the same storage, never recorded by autograd.
// The differentiable Tensor member functions (engine/autograd/) are built on these; kernels
// and optimizers use them directly.
#include "engine/core/tensor.h"

namespace anvil::raw {

// A tensor with the given geometry over `base`'s storage (no checks beyond bounds).
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, std::int64_t offset);

Tensor transpose(const Tensor& t, std::int64_t d0, std::int64_t d1);
Tensor permute(const Tensor& t, const Shape& order);
// Resolves one -1 in `shape` against numel; throws when the count does not match.
Shape infer_shape(const Shape& shape, std::int64_t numel, const char* where);
// A view with the new shape, or an undefined tensor when the strides do not allow one.
Tensor try_view(const Tensor& t, const Shape& shape);
Tensor view(const Tensor& t, const Shape& shape);     // throws when not viewable
Tensor reshape(const Tensor& t, const Shape& shape);  // view or copy
Tensor slice(const Tensor& t, std::int64_t dim, std::int64_t start, std::int64_t end,
             std::int64_t step);
Tensor select(const Tensor& t, std::int64_t dim, std::int64_t index);
Tensor expand(const Tensor& t, const Shape& shape);
Tensor unsqueeze(const Tensor& t, std::int64_t dim);
Tensor squeeze(const Tensor& t, std::int64_t dim);
Tensor contiguous(const Tensor& t);
Tensor clone(const Tensor& t);
Tensor to_dtype(const Tensor& t, DType dtype);
Tensor to_device(const Tensor& t, Device device);
Tensor detach(const Tensor& t);  // same storage and geometry, no autograd state

// Broadcast shape of a and b (numpy rules); throws naming `where` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* where);

}  // namespace anvil::raw
