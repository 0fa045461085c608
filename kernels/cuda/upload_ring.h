// SPDX-License-Identifier: Apache-2.0
#pragma once
// upload_small(): host -> device copies of small host-built tables (the multi-tensor launch
// tables of optimizer_kernels.cu) without a host wait. C++17-clean.
//
// Note [Small uploads]
// cudaMemcpyAsync from pageable memory "may synchronize with the stream" while the driver stages
// the bytes (CUDA runtime API, "API synchronization behavior"), i.e. a hidden host wait in every
// optimizer call of a GPU step. So small tables are first copied into one of kSlots page-locked
// slots of kSlotBytes per device and DMA'd from there, truly asynchronously. An event per slot
// says when its DMA has finished; a slot is reused only once its event has completed, which
// waits (and is counted, Note [Host waits in a step]) only when kSlots uploads are still in
// flight. Larger tables take the plain cudaMemcpyAsync.
#include <cuda_runtime_api.h>

#include <cstddef>

namespace anvil::cuda {

inline constexpr std::size_t kUploadSlotBytes = std::size_t{64} << 10;
inline constexpr int kUploadSlots = 64;

// dst (device memory of the current device) = src (host), enqueued on `stream`; `src` may be
// reused as soon as this returns.
void upload_small(void* dst, const void* src, std::size_t bytes, cudaStream_t stream);

}  // namespace anvil::cuda
