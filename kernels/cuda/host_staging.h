// SPDX-License-Identifier: Apache-2.0
#pragma once
// HostStaging: host <-> device copies of pageable host memory through a reusable pair of
// pinned (page-locked) buffers per device, for CudaBackend::copy. See Note [Pinned staging].
// C++17-clean.
//
// Note [Pinned staging]
// The GPU's copy engines can only DMA from page-locked memory; a cudaMemcpy from pageable
// memory is staged by the driver through its own small buffers, synchronously and with extra
// overhead. anvil's tensors live in ordinary (pageable) 64-byte aligned memory, so large
// transfers are staged here instead: the copy is cut into kChunkBytes pieces that alternate
// between two pinned buffers, so that the host-side memcpy of one piece overlaps the DMA of the
// other (an event per buffer says when the DMA that last used it has finished). The buffers
// (2 x 4 MiB per device) are allocated on the first large copy and kept for the life of the
// process. One mutex per device serialises the users of the buffers. Copies below
// kMinStagedBytes, and host memory that is already pinned (cudaHostAlloc'd or registered), go
// straight to cudaMemcpyAsync. When pinned memory cannot be had, copies fall back to the direct
// path for good. Every copy is waited for before returning (CudaBackend::copy's contract); it
// runs on the device's stream, so it is ordered after the kernels queued before it.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>

namespace anvil::cuda {

class HostStaging {
 public:
  static constexpr std::size_t kChunkBytes = std::size_t{4} << 20;
  static constexpr std::size_t kMinStagedBytes = std::size_t{256} << 10;

  HostStaging() = default;
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;
  // Never frees the buffers: the backend lives until process exit (see cuda_backend_impl.cpp).
  ~HostStaging() = default;

  // dst (device memory of this device) = src (host memory), on `stream`, then waits. The
  // caller has made this device current.
  void to_device(void* dst, const void* src, std::size_t bytes, cudaStream_t stream);
  // dst (host memory) = src (device memory of this device), on `stream`, then waits.
  void to_host(void* dst, const void* src, std::size_t bytes, cudaStream_t stream);

 private:
  bool use_staging(const void* host, std::size_t bytes);
  bool ensure_buffers_locked();  // false when pinned memory is unavailable; mu_ held
  void wait_buffers_locked();    // the DMA of earlier calls no longer touches the buffers

  std::mutex mu_;
  void* buffer_[2] = {nullptr, nullptr};
  cudaEvent_t done_[2] = {nullptr, nullptr};  // recorded after the last DMA using buffer_[i]
  bool unavailable_ = false;
};

}  // namespace anvil::cuda
