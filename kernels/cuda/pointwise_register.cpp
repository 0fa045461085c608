// SPDX-License-Identifier: Apache-2.0
// Registration of the CUDA pointwise family: adapts the engine tables' Args to the C++17
// launchers of the custom kernels, on the device's anvil stream under a DeviceGuard.
//   elementwise: cuda.custom.elementwise (elementwise_kernels.cu)
//   reduce:      cuda.custom.reduce      (reduce_kernels.cu)
//   softmax:     cuda.custom.softmax     (softmax_kernels.cu; also cross-entropy)
// Bias add: linear writes the bias with Tensor::copy_ of an expanded view, which on CUDA is the
// broadcast strided copy (copy_kernels.cu), so there is no separate bias-add variant
// (docs/cuda.md, "Pointwise, reduction and softmax kernels").
#include "engine/core/error.h"
#include "engine/core/tensor.h"
#include "engine/dispatch/elementwise_problem.h"
#include "engine/dispatch/reduce_problem.h"
#include "engine/dispatch/softmax_problem.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_guard.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/reduce_kernels.h"
#include "kernels/cuda/register.h"
#include "kernels/cuda/softmax_kernels.h"

namespace anvil::cuda {
namespace {

Support elementwise_support(const ElementwiseProblem& p) {
  if (is_half(p.dtype))
    return Support::no(detail::str_cat("no ", dtype_name(p.dtype), " kernel yet (CPU only)"));
  if (!is_floating(p.dtype) && !ew_allows_integers(p.op))
    return Support::no(detail::str_cat(ew_name(p.op), " is not defined for ", dtype_name(p.dtype)));
  return Support::yes();
}

void run_elementwise(const ElementwiseArgs& a) {
  const int device = a.problem.device.index;
  cudaStream_t s = stream(device);
  DeviceGuard guard(device);
  EwLaunch l;
  l.op = a.problem.op;
  l.dtype = a.problem.dtype;
  l.sizes = a.sizes;
  l.ndim = a.ndim;
  l.out = a.out.data;
  l.out_strides = a.out.strides;
  l.a = a.a.data;
  l.a_strides = a.a.strides;
  if (ew_arity(a.problem.op) == 2) {
    l.b = a.b.data;
    l.b_strides = a.b.strides;
  }
  l.scalar = a.scalar;
  l.alpha = a.alpha;
  elementwise(s, l);
}

void run_reduce(const ReduceArgs& a) {
  const auto& p = a.problem;
  cudaStream_t s = stream(p.device.index);
  DeviceGuard guard(p.device.index);
  if (p.op == ReduceOp::sum)
    reduce_sum(s, p.dtype, a.x, a.out, p.outer, p.reduce, p.inner, a.scale);
  else
    reduce_max(s, p.dtype, a.x, a.out, a.index, p.outer, p.reduce, p.inner);
}

void run_softmax(const SoftmaxArgs& a) {
  const auto& p = a.problem;
  cudaStream_t s = stream(p.device.index);
  DeviceGuard guard(p.device.index);
  switch (p.op) {
    case SoftmaxOp::softmax:
    case SoftmaxOp::log_softmax:
      return softmax_rows(s, p.dtype, a.x, a.out, p.rows, p.cols, p.op == SoftmaxOp::log_softmax);
    case SoftmaxOp::softmax_backward:
    case SoftmaxOp::log_softmax_backward:
      return softmax_backward_rows(s, p.dtype, a.x, a.dy, a.out, p.rows, p.cols,
                                   p.op == SoftmaxOp::log_softmax_backward);
    case SoftmaxOp::cross_entropy_forward: {
      // 8 bytes of device scratch for the first out-of-range row (from the caching allocator;
      // stream order makes its reuse after this call safe, Note [CUDA block cache]).
      Tensor flag = Tensor::empty({1}, DType::i64, p.device);
      return cross_entropy_forward(s, p.dtype, p.index_dtype, a.x, a.target, a.out, a.lse, p.rows,
                                   p.cols, flag.data_ptr(), device_error_record(p.device.index));
    }
    case SoftmaxOp::cross_entropy_backward:
      return cross_entropy_backward(s, p.dtype, p.index_dtype, a.x, a.target, a.lse, a.out, p.rows,
                                    p.cols, a.scale, a.scale_device);
    case SoftmaxOp::cross_entropy_forward_grad:  // refused by softmax_basic_support
      fail("cuda.custom.softmax", "no kernel for ", p.repr());
  }
}

}  // namespace

void register_cuda_pointwise() {
  elementwise_table().add({
      .name = "cuda.custom.elementwise",
      .device = DeviceType::cuda,
      .supports = elementwise_support,
      .fn = run_elementwise,
      .description = "own CUDA kernel per op: flat when dense, N-d strided otherwise",
  });
  reduce_table().add({
      .name = "cuda.custom.reduce",
      .device = DeviceType::cuda,
      .supports = reduce_basic_support,
      .fn = run_reduce,
      .description = "warp/block per row (inner == 1), 32-column tiles (inner > 1)",
  });
  softmax_table().add({
      .name = "cuda.custom.softmax",
      .device = DeviceType::cuda,
      .supports = softmax_basic_support,
      .fn = run_softmax,
      .description = "warp/block per row, max-subtracted, fused cross-entropy",
  });
}

}  // namespace anvil::cuda
