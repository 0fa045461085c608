// SPDX-License-Identifier: Apache-2.0
// Pinned-buffer staging of host <-> device copies (Note [Pinned staging], host_staging.h).
#include "kernels/cuda/host_staging.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/cuda_check.h"

namespace anvil::cuda {
namespace {

// True for page-locked host memory (cudaHostAlloc'd or cudaHostRegister'ed) and managed memory,
// which the copy engines reach directly.
bool dma_capable_host(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost || attr.type == cudaMemoryTypeManaged;
}

}  // namespace

bool HostStaging::use_staging(const void* host, std::size_t bytes) {
  return bytes >= kMinStagedBytes && !dma_capable_host(host);
}

bool HostStaging::ensure_buffers_locked() {
  if (unavailable_) return false;
  if (buffer_[0] != nullptr) return true;
  void* b[2] = {nullptr, nullptr};
  for (int i = 0; i < 2; ++i) {
    // Portable: usable from every device's context, not only the one current now.
    if (cudaHostAlloc(&b[i], kChunkBytes, cudaHostAllocPortable) != cudaSuccess) {
      (void)cudaGetLastError();
      if (b[0] != nullptr) (void)cudaFreeHost(b[0]);
      unavailable_ = true;  // e.g. a locked-memory limit: the direct path still works
      return false;
    }
  }
  for (int i = 0; i < 2; ++i)
    if (done_[i] == nullptr)
      ANVIL_CUDA_CHECK(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming));
  buffer_[0] = b[0];
  buffer_[1] = b[1];
  return true;
}

void HostStaging::wait_buffers_locked() {
  // A call that threw half-way may have left DMA in flight on a buffer; events never recorded
  // count as complete.
  for (cudaEvent_t e : done_) ANVIL_CUDA_CHECK(cudaEventSynchronize(e));
}

void HostStaging::to_device(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!use_staging(src, bytes) || !ensure_buffers_locked()) {
    lock.unlock();
    ANVIL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    ANVIL_CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  wait_buffers_locked();
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  int i = 0;
  for (std::size_t off = 0; off < bytes; off += kChunkBytes, i ^= 1) {
    const std::size_t n = std::min(kChunkBytes, bytes - off);
    ANVIL_CUDA_CHECK(cudaEventSynchronize(done_[i]));  // the DMA that last read buffer i is done
    std::memcpy(buffer_[i], s + off, n);
    ANVIL_CUDA_CHECK(cudaMemcpyAsync(d + off, buffer_[i], n, cudaMemcpyHostToDevice, stream));
    ANVIL_CUDA_CHECK(cudaEventRecord(done_[i], stream));
  }
  ANVIL_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void HostStaging::to_host(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!use_staging(dst, bytes) || !ensure_buffers_locked()) {
    lock.unlock();
    ANVIL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
    ANVIL_CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  wait_buffers_locked();
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  const std::size_t chunks = (bytes + kChunkBytes - 1) / kChunkBytes;
  const auto chunk_bytes = [&](std::size_t c) {
    return std::min(kChunkBytes, bytes - c * kChunkBytes);
  };
  // Chunk c goes through buffer c % 2: two DMAs are queued ahead, and chunk c + 2 is queued
  // only once chunk c has been copied out of the buffer they share.
  const auto enqueue = [&](std::size_t c) {
    const int b = static_cast<int>(c % 2);
    ANVIL_CUDA_CHECK(cudaMemcpyAsync(buffer_[b], s + c * kChunkBytes, chunk_bytes(c),
                                     cudaMemcpyDeviceToHost, stream));
    ANVIL_CUDA_CHECK(cudaEventRecord(done_[b], stream));
  };
  enqueue(0);
  if (chunks > 1) enqueue(1);
  for (std::size_t c = 0; c < chunks; ++c) {
    const int b = static_cast<int>(c % 2);
    ANVIL_CUDA_CHECK(cudaEventSynchronize(done_[b]));
    std::memcpy(d + c * kChunkBytes, buffer_[b], chunk_bytes(c));
    if (c + 2 < chunks) enqueue(c + 2);
  }
  // The last event covers all earlier work on the stream, so everything is complete here.
}

}  // namespace anvil::cuda
