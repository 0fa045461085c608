// SPDX-License-Identifier: Apache-2.0
// Reductions (engine/ops/reduce.h): move the reduced dims together, then one call of the
// `reduce` table (engine/dispatch/reduce_problem.h) over [outer, reduce, inner], on the
// input's device.
#include "engine/ops/reduce.h"

#include <algorithm>
#include <limits>

#include "engine/core/views.h"
#include "engine/dispatch/reduce_problem.h"
#include "engine/dispatch/trial_timer.h"

namespace anvil::ops {
namespace {

struct Plan {
  Tensor x;  // contiguous input arranged so the reduced dims form one block
  std::int64_t outer = 1, reduce = 1, inner = 1;
  Shape out_shape;       // result shape with keepdim
  Shape squeezed_shape;  // without keepdim
};

std::vector<bool> reduced_mask(const Tensor& x, const std::vector<std::int64_t>& dims,
                               const char* where) {
  std::vector<bool> red(x.dim(), dims.empty());
  for (auto d : dims) {
    const auto w = wrap_dim(d, x.dim(), where);
    ANVIL_CHECK(!red[w] || dims.empty(), where, "dimension ", d, " listed twice");
    red[w] = true;
  }
  return red;
}

Plan plan(const Tensor& x, const std::vector<std::int64_t>& dims, const char* where) {
  check_defined(x, where, "input");
  // bf16/f16 reduce through ref, widened (Note [Reductions of 16-bit tensors]).
  ANVIL_CHECK(is_any_floating(x.dtype()), where, "needs a floating-point tensor, got ",
              dtype_name(x.dtype()));
  const auto red = reduced_mask(x, dims, where);
  Plan p;
  // Is the reduced set one contiguous block of dims? Then no permutation is needed.
  std::int64_t first = -1, last = -1;
  for (std::int64_t d = 0; d < x.dim(); ++d)
    if (red[d]) {
      if (first < 0) first = d;
      last = d;
    }
  bool block = true;
  for (std::int64_t d = first; d >= 0 && d <= last; ++d) block = block && red[d];
  Shape order;
  if (block || first < 0) {
    for (std::int64_t d = 0; d < x.dim(); ++d) order.push_back(d);
  } else {  // kept dims first, reduced last
    for (std::int64_t d = 0; d < x.dim(); ++d)
      if (!red[d]) order.push_back(d);
    for (std::int64_t d = 0; d < x.dim(); ++d)
      if (red[d]) order.push_back(d);
  }
  p.x = raw::contiguous(raw::permute(x, order));
  bool in_reduce = false, after = false;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::int64_t s = x.sizes()[order[i]];
    if (red[order[i]]) {
      p.reduce *= s;
      in_reduce = true;
    } else if (in_reduce || after) {
      p.inner *= s;
      after = true;
    } else
      p.outer *= s;
  }
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    p.out_shape.push_back(red[d] ? 1 : x.sizes()[d]);
    if (!red[d]) p.squeezed_shape.push_back(x.sizes()[d]);
  }
  return p;
}

// One table call; an empty output needs none.
void run(const Plan& p, ReduceOp op, const Tensor& out, std::int64_t* index, double scale) {
  if (out.numel() == 0) return;
  ReduceArgs args;
  args.problem.op = op;
  args.problem.dtype = p.x.dtype();
  args.problem.device = p.x.device();
  args.problem.outer = p.outer;
  args.problem.reduce = p.reduce;
  args.problem.inner = p.inner;
  args.x = p.x.data_ptr();
  args.out = out.data_ptr();
  args.index = index;
  args.scale = scale;
  // Every variant writes out (and index) without reading them: a trial may run on them.
  reduce_table().run(args, [&args](const ReduceTable::Variant& v) {
    return time_trial(
        args.problem.device, [&] { v.fn(args); }, "reduce autotune");
  });
}

Tensor sum_impl(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim, bool mean,
                const char* where) {
  Plan p = plan(x, dims, where);
  Tensor out = Tensor::empty(keepdim ? p.out_shape : p.squeezed_shape, x.dtype(), x.device());
  const double scale = mean ? (p.reduce > 0 ? 1.0 / static_cast<double>(p.reduce)
                                            : std::numeric_limits<double>::quiet_NaN())
                            : 1.0;
  run(p, ReduceOp::sum, out, nullptr, scale);
  return out;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return sum_impl(x, dims, keepdim, false, "sum");
}
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return sum_impl(x, dims, keepdim, true, "mean");
}

std::pair<Tensor, Tensor> max(const Tensor& x, std::int64_t dim, bool keepdim) {
  Plan p = plan(x, {dim}, "max");
  ANVIL_CHECK(p.reduce > 0, "max", "cannot take the max over an empty dimension of ",
              shape_str(x.sizes()));
  const Shape& shape = keepdim ? p.out_shape : p.squeezed_shape;
  Tensor values = Tensor::empty(shape, x.dtype(), x.device());
  Tensor index = Tensor::empty(shape, DType::i64, x.device());
  run(p, ReduceOp::max, values, static_cast<std::int64_t*>(index.data_ptr()), 1.0);
  return {values, index};
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.sizes() == shape) return g;
  const std::int64_t lead = g.dim() - static_cast<std::int64_t>(shape.size());
  ANVIL_CHECK(lead >= 0, "sum_to", "cannot reduce ", shape_str(g.sizes()), " to ",
              shape_str(shape));
  std::vector<std::int64_t> dims;
  for (std::int64_t d = 0; d < g.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && g.sizes()[d] != 1)) dims.push_back(d);
  }
  Tensor s = dims.empty() ? g : sum(g, dims, true);
  return raw::reshape(s, shape);
}

}  // namespace anvil::ops
