// SPDX-License-Identifier: Apache-2.0
// Differentiable reductions: sum, mean, max (and the non-differentiable argmax).
#include "engine/autograd/autocast.h"
#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"
#include "engine/core/views.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"

namespace anvil {
namespace {
using Grads = std::vector<Tensor>;

// The keepdim shape of reducing `shape` over `dims` (all when empty).
Shape keepdim_shape(const Shape& shape, const std::vector<std::int64_t>& dims) {
  Shape out = shape;
  if (dims.empty()) {
    for (auto& s : out) s = 1;
  } else {
    for (auto d : dims) out[wrap_dim(d, static_cast<std::int64_t>(shape.size()), "sum")] = 1;
  }
  return out;
}

Tensor sum_or_mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim,
                   bool is_mean) {
  Tensor out = is_mean ? ops::mean(x, dims, keepdim) : ops::sum(x, dims, keepdim);
  if (any_requires_grad({&x})) {
    const Shape& in_shape = x.sizes();
    const Shape kd = keepdim_shape(in_shape, dims);
    const double scale =
        is_mean ? static_cast<double>(out.numel()) / static_cast<double>(x.numel()) : 1.0;
    record(is_mean ? "MeanBackward" : "SumBackward", {x}, {out},
           [in_shape, kd, scale](const Grads& g) {
             Tensor gk = raw::reshape(g[0], kd);
             Tensor full = raw::contiguous(raw::expand(gk, in_shape));
             if (scale != 1.0) ops::mul_scalar_(full, scale);
             return Grads{full};
           });
  }
  return out;
}
// MaxBackward off the CPU, from device ops only: full = g * [position along d == index]
// (the index converted to g's dtype is exact below 2^24 positions for f32).
Tensor scatter_to_max(const Tensor& g, const Tensor& idx, const Shape& in_shape, std::int64_t d,
                      bool keepdim) {
  const Tensor gk = keepdim ? g : raw::unsqueeze(g, d);
  Shape pos_shape(in_shape.size(), 1);
  pos_shape[d] = in_shape[d];
  const Tensor pos = raw::to_device(
      raw::reshape(Tensor::arange(static_cast<double>(in_shape[d]), g.dtype()), pos_shape),
      g.device());
  const Tensor dist = ops::unary(EwOp::abs, ops::sub(pos, raw::to_dtype(idx, g.dtype())));
  const Tensor half = Tensor::full({}, 0.5, g.dtype(), g.device());
  const Tensor hit =
      ops::unary(EwOp::rsub_scalar, ops::binary(EwOp::gt, dist, half), 1.0);  // 1 at the max
  return ops::mul(hit, gk);
}
}  // namespace

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return sum_or_mean(autocast_input("sum", x), dims, keepdim, false);  // Note [Autocast policy]
}
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return sum_or_mean(autocast_input("mean", x), dims, keepdim, true);
}

Tensor max(const Tensor& x, std::int64_t dim, bool keepdim) {
  auto [values, index] = ops::max(x, dim, keepdim);
  if (any_requires_grad({&x})) {
    const Shape& in_shape = x.sizes();
    const std::int64_t d = wrap_dim(dim, x.dim(), "max");
    const Tensor idx = keepdim ? index : raw::unsqueeze(index, d);
    const DType dt = x.dtype();
    record("MaxBackward", {x}, {values}, [in_shape, d, idx, dt, keepdim](const Grads& g) {
      // Scatter each gradient to the position of its maximum along d.
      if (!idx.device().is_cpu()) return Grads{scatter_to_max(g[0], idx, in_shape, d, keepdim)};
      Tensor full = Tensor::zeros(in_shape, dt);
      Tensor gk = raw::contiguous(keepdim ? g[0] : raw::unsqueeze(g[0], d));
      const Shape& ks = gk.sizes();
      std::int64_t outer = 1, inner = 1;
      for (std::int64_t i = 0; i < d; ++i) outer *= ks[i];
      for (std::int64_t i = d + 1; i < static_cast<std::int64_t>(ks.size()); ++i) inner *= ks[i];
      const std::int64_t n = in_shape[d];
      const std::int64_t* ip = idx.data<std::int64_t>();
      visit_all_dtypes(dt, [&](auto zero) {
        using T = decltype(zero);
        const T* gp = gk.data<T>();
        T* fp = full.data<T>();
        for (std::int64_t o = 0; o < outer; ++o)
          for (std::int64_t i = 0; i < inner; ++i)
            fp[(o * n + ip[o * inner + i]) * inner + i] = gp[o * inner + i];
      });
      return Grads{full};
    });
  }
  return values;
}

Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim) {
  return ops::max(x, dim, keepdim).second;
}

}  // namespace anvil
