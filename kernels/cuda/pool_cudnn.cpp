// SPDX-License-Identifier: Apache-2.0
// `cuda.cudnn` pooling: cudnnPoolingForward / cudnnPoolingBackward on packed NCHW f32/f64
// tensors, with the descriptor parameters and refusals of cudnn_pool_plan() (pool_bn_plan.h,
// Note [cuDNN pooling refusals]). The plan and its descriptors are built once per problem and
// cached (Note [Stable cache entries], kernels/stable_cache.h); the work runs on the device's
// anvil stream (cudnn_handle.h).
#include <cudnn.h>

#include <cstdint>
#include <memory>

#include "engine/core/tensor.h"
#include "engine/dispatch/pool_problem.h"
#include "engine/dispatch/problem_fields.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/pool_bn_cudnn_util.h"
#include "kernels/cuda/cudnn_handle.h"
#include "kernels/cuda/device_guard.h"
#include "kernels/cuda/pool_bn_plan.h"
#include "kernels/stable_cache.h"

namespace anvil::cuda {
namespace {

cudnnPoolingMode_t mode_of(CudnnPoolMode m) {
  switch (m) {
    case CudnnPoolMode::max_deterministic:
      return CUDNN_POOLING_MAX_DETERMINISTIC;
    case CudnnPoolMode::avg_include_padding:
      return CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    case CudnnPoolMode::avg_exclude_padding:
      return CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  }
  fail("cuda.cudnn pooling", "unknown mode ", static_cast<int>(m));
}

// Owns a cudnnPoolingDescriptor_t.
class PoolingDesc {
 public:
  PoolingDesc() { ANVIL_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d_)); }
  ~PoolingDesc() { (void)cudnnDestroyPoolingDescriptor(d_); }
  PoolingDesc(const PoolingDesc&) = delete;
  PoolingDesc& operator=(const PoolingDesc&) = delete;
  cudnnPoolingDescriptor_t get() const { return d_; }

 private:
  cudnnPoolingDescriptor_t d_ = nullptr;
};

// The plan of one problem and its descriptors, set once and then only read.
struct PoolEntry {
  CudnnPoolPlan plan;
  TensorDesc x_desc, y_desc;
  PoolingDesc pool;
  PoolEntry(const CudnnPoolPlan& pl, DType dtype) : plan(pl) {
    const cudnnDataType_t dt = cudnn_data_type(dtype);
    x_desc.set_nchw(dt, plan.n, plan.c, plan.h, plan.w);
    y_desc.set_nchw(dt, plan.n, plan.c, plan.oh, plan.ow);
    // NaN option: CUDNN_PROPAGATE_NAN, since in ref a NaN always wins a max window (Note [NaN
    // propagation]; ignored by the average modes).
    ANVIL_CUDNN_CHECK(cudnnSetPooling2dDescriptor(
        pool.get(), mode_of(plan.mode), CUDNN_PROPAGATE_NAN, plan.window_h, plan.window_w,
        plan.pad_h, plan.pad_w, plan.stride_h, plan.stride_w));
  }
};

// One lookup per call; a refused problem is not cached (it throws every time, as before).
const PoolEntry& pool_entry(const PoolProblem& p) {
  static auto* cache = new kernels::StableCache<PoolProblem, PoolEntry, ProblemHasher>();
  if (const PoolEntry* e = cache->find(p)) return *e;
  const CudnnPoolPlan plan = cudnn_pool_plan(p);
  ANVIL_CHECK(plan.support.ok, "cuda.cudnn pooling", "cannot run ", p.repr(), ": ",
              plan.support.reason);
  return *cache->insert(p, std::make_unique<const PoolEntry>(plan, p.dtype)).first;
}

}  // namespace

void run_pool_cudnn(const PoolArgs& a) {
  const PoolProblem& p = a.problem;
  const PoolEntry& e = pool_entry(p);
  const TensorDesc& x_desc = e.x_desc;
  const TensorDesc& y_desc = e.y_desc;
  const PoolingDesc& pool = e.pool;
  const int device = p.device.index;
  DeviceGuard guard(device);
  cudnnHandle_t h = cudnn_handle(device);  // bound to the device's anvil stream
  const ScalingFactors one_zero(p.dtype);  // alpha = 1, beta = 0 in the data type's width
  if (p.pass != PoolPass::backward) {
    // y = 1 * pool(x) + 0 * y. Max runs here for inference only (the plan declines training).
    ANVIL_CUDNN_CHECK(cudnnPoolingForward(h, pool.get(), one_zero.one(), x_desc.get(), a.x,
                                          one_zero.zero(), y_desc.get(), a.y));
    return;
  }
  // Average backward (the plan declines max backward). cudnnPoolingBackward takes y and x, which
  // only the max modes need; anvil's backward has neither. y points at dy (same shape, read
  // only) and x at a zeroed scratch of x's shape (from the caching allocator, freed on return:
  // safe, one stream per device), so no input aliases the output dx (beta = 0: dx is written).
  Tensor x_stand_in = Tensor::empty({p.n, p.c, p.h, p.w}, p.dtype, p.device);
  ANVIL_CUDA_CHECK(cudaMemsetAsync(x_stand_in.data_ptr(), 0,
                                   static_cast<std::size_t>(p.in_numel()) * dtype_size(p.dtype),
                                   stream(device)));
  ANVIL_CUDNN_CHECK(cudnnPoolingBackward(h, pool.get(), one_zero.one(), y_desc.get(), a.dy,
                                         y_desc.get(), a.dy, x_desc.get(), x_stand_in.data_ptr(),
                                         one_zero.zero(), x_desc.get(), a.dx));
}

}  // namespace anvil::cuda
