// SPDX-License-Identifier: Apache-2.0
// Registration of `cuda.custom.embedding` (embedding_kernels.cu) in the embedding table
// (engine/dispatch/embedding_problem.h): device scratch from the engine's caching allocator,
// launches on the device's anvil stream; id range errors go to the device's error record.
#include "engine/core/tensor.h"
#include "engine/dispatch/embedding_problem.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_guard.h"
#include "kernels/cuda/embedding_kernels.h"
#include "kernels/cuda/host_waits.h"
#include "kernels/cuda/register.h"

namespace anvil::cuda {
namespace {

// Scratch of at least `bytes` bytes on `device`; its block may be reused by later work as soon
// as the caller returns, which stream order makes safe (Note [CUDA block cache]).
Tensor scratch_of(std::size_t bytes, Device device) {
  const auto words =
      static_cast<std::int64_t>((bytes + sizeof(std::int64_t) - 1) / sizeof(std::int64_t));
  return Tensor::empty({words > 0 ? words : 1}, DType::i64, device);
}

void run(const EmbeddingArgs& a) {
  const EmbeddingProblem& p = a.problem;
  const int device = p.device.index;
  cudaStream_t s = stream(device);
  DeviceGuard guard(device);
  if (p.pass == EmbeddingPass::forward) {
    Tensor scratch = scratch_of(embedding_forward_scratch_bytes(), p.device);
    embedding_forward(s, p.dtype, p.index_dtype, a.weight, a.ids, a.out, p.rows, p.dim, p.n,
                      scratch.data_ptr(), device_error_record(device));
  } else {
    const std::size_t bytes = embedding_backward_scratch_bytes(p.n);
    Tensor scratch = scratch_of(bytes, p.device);
    embedding_backward(s, p.dtype, p.index_dtype, a.dy, a.ids, a.grad, p.rows, p.dim, p.n,
                       scratch.data_ptr(), bytes);
  }
}

}  // namespace

void register_cuda_embedding() {
  embedding_table().add({.name = "cuda.custom.embedding",
                         .device = DeviceType::cuda,
                         .supports = embedding_basic_support,
                         .fn = run,
                         .description =
                             "row gather; backward: stable radix sort by id, then per-id sums in "
                             "position order (deterministic, bit-equal to the CPU)"});
}

}  // namespace anvil::cuda
