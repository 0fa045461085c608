// SPDX-License-Identifier: Apache-2.0
// Pooling: max, average, adaptive average and global average 2-D pooling with their backward.
// The backward of max pooling routes each output gradient to the position of its maximum as
// recorded by the training forward (Note [Max-pool workspace]); the forward state is kept in
// the node without its output y (no saved outputs: Note [Autograd graph]).
#include <memory>
#include <string_view>

#include "engine/autograd/autocast.h"
#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"
#include "engine/ops/pool.h"

namespace anvil {
namespace {

using Grads = std::vector<Tensor>;

Tensor pool(const char* node_name, const Tensor& x, const PoolProblem& problem) {
  const bool needs_grad = any_requires_grad({&x});
  auto fwd = std::make_shared<ops::PoolForward>(ops::pool2d_forward(x, problem, needs_grad));
  Tensor y = fwd->y;
  fwd->y = Tensor();  // the backward does not need it
  if (needs_grad)
    record(node_name, {x}, {y},
           [fwd](const Grads& g) { return Grads{ops::pool2d_backward(g[0], *fwd)}; });
  return y;
}

// Pooling is on neither autocast list: it runs in its input's type, so a bf16 conv output is
// pooled in bf16 on the CPU (Note [Autocast policy]). The CUDA pooling kernels are f32/f64 only,
// so there a 16-bit input under autocast is pooled in f32, as when pooling was in the FP32 list.
Tensor pool_input(std::string_view op, const Tensor& x) {
  if (autocast_enabled() && x.defined() && is_half(x.dtype()) && !x.device().is_cpu())
    return x.to(DType::f32);
  return autocast_input(op, x);
}

}  // namespace

Tensor max_pool2d(const Tensor& x_in, const Pool2dOptions& o) {
  const Tensor x = pool_input("max_pool2d", x_in);
  const PoolProblem p = ops::pool2d_problem(PoolKind::max, x, o.kernel, o.stride, o.padding,
                                            o.ceil_mode, true, "max_pool2d");
  return pool("MaxPool2dBackward", x, p);
}

Tensor avg_pool2d(const Tensor& x_in, const Pool2dOptions& o) {
  const Tensor x = pool_input("avg_pool2d", x_in);
  const PoolProblem p = ops::pool2d_problem(PoolKind::avg, x, o.kernel, o.stride, o.padding,
                                            o.ceil_mode, o.count_include_pad, "avg_pool2d");
  return pool("AvgPool2dBackward", x, p);
}

Tensor adaptive_avg_pool2d(const Tensor& x_in, std::array<std::int64_t, 2> output_size) {
  const Tensor x = pool_input("adaptive_avg_pool2d", x_in);
  const PoolProblem p = ops::adaptive_avg_pool2d_problem(x, output_size, "adaptive_avg_pool2d");
  return pool("AdaptiveAvgPool2dBackward", x, p);
}

Tensor global_avg_pool2d(const Tensor& x) {
  check_defined(x, "global_avg_pool2d", "input");
  ANVIL_CHECK(x.dim() == 4, "global_avg_pool2d", "expected 4-D input (N,C,H,W), got ",
              shape_str(x.sizes()));
  const Tensor xa = pool_input("adaptive_avg_pool2d", x);
  const PoolProblem p = ops::adaptive_avg_pool2d_problem(xa, {1, 1}, "global_avg_pool2d");
  return pool("AdaptiveAvgPool2dBackward", xa, p).flatten(1);
}

}  // namespace anvil
