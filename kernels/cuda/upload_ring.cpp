// SPDX-License-Identifier: Apache-2.0
// The page-locked slot ring of upload_small() (Note [Small uploads], upload_ring.h).
#include "kernels/cuda/upload_ring.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/host_waits.h"

namespace anvil::cuda {
namespace {

struct Ring {
  std::mutex mu;
  bool ready = false;
  bool unavailable = false;  // pinned memory could not be had: plain copies from then on
  char* slots = nullptr;     // kUploadSlots * kUploadSlotBytes, page-locked
  cudaEvent_t done[kUploadSlots] = {};
  int next = 0;
};

std::mutex g_mu;
std::vector<std::unique_ptr<Ring>> g_rings;  // by device; never freed (lives until exit)

Ring& ring_of(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_rings.size() <= static_cast<std::size_t>(device))
    g_rings.resize(static_cast<std::size_t>(device) + 1);
  auto& r = g_rings[static_cast<std::size_t>(device)];
  if (!r) r = std::make_unique<Ring>();
  return *r;
}

bool prepare_locked(Ring& r) {
  if (r.ready) return true;
  if (r.unavailable) return false;
  void* p = nullptr;
  if (cudaHostAlloc(&p, kUploadSlotBytes * kUploadSlots, cudaHostAllocDefault) != cudaSuccess) {
    (void)cudaGetLastError();
    r.unavailable = true;
    return false;
  }
  r.slots = static_cast<char*>(p);
  for (auto& e : r.done) ANVIL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  r.ready = true;
  return true;
}

}  // namespace

void upload_small(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  int device = 0;
  ANVIL_CUDA_CHECK(cudaGetDevice(&device));
  Ring& r = ring_of(device);
  std::unique_lock<std::mutex> lock(r.mu);
  if (bytes > kUploadSlotBytes || !prepare_locked(r)) {
    lock.unlock();
    ANVIL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    return;
  }
  const int i = r.next;
  r.next = (r.next + 1) % kUploadSlots;
  // An event never recorded counts as complete.
  const cudaError_t q = cudaEventQuery(r.done[i]);
  if (q == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" must not surface as the next launch check's error
    ANVIL_CUDA_CHECK(cudaEventSynchronize(r.done[i]));
    note_host_wait();
  } else if (q != cudaSuccess) {
    ANVIL_CUDA_CHECK(q);
  }
  char* slot = r.slots + static_cast<std::size_t>(i) * kUploadSlotBytes;
  std::memcpy(slot, src, bytes);
  ANVIL_CUDA_CHECK(cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, stream));
  ANVIL_CUDA_CHECK(cudaEventRecord(r.done[i], stream));
}

}  // namespace anvil::cuda
