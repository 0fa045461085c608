// SPDX-License-Identifier: Apache-2.0
// Host-wait counters and the per-device error record (Note [Host waits in a step],
// host_waits.h): mapped page-locked memory written by kernels, read by the host after a wait.
#include "kernels/cuda/host_waits.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "engine/core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_guard.h"

namespace anvil::cuda {
namespace {

std::atomic<std::uint64_t> g_waits{0};
std::atomic<std::uint64_t> g_readbacks{0};

struct Record {
  DeviceErrorRecord* host = nullptr;    // what the host reads
  DeviceErrorRecord* device = nullptr;  // the same bytes as kernels address them
};

std::mutex g_mu;
std::vector<Record> g_records;  // by device; never freed (the backend lives until exit)

Record& record_locked(int device) {
  ANVIL_CHECK(device >= 0, "device_error_record", "bad device ", device);
  if (g_records.size() <= static_cast<std::size_t>(device))
    g_records.resize(static_cast<std::size_t>(device) + 1);
  Record& r = g_records[static_cast<std::size_t>(device)];
  if (r.host == nullptr) {
    DeviceGuard guard(device);
    void* p = nullptr;
    // Portable: pinned for every context; mapped: kernels address it through a device pointer.
    ANVIL_CUDA_CHECK(
        cudaHostAlloc(&p, sizeof(DeviceErrorRecord), cudaHostAllocMapped | cudaHostAllocPortable));
    auto* host = static_cast<DeviceErrorRecord*>(p);
    *host = DeviceErrorRecord{kDeviceErrorNone, 0, 0, 0};
    void* d = nullptr;
    ANVIL_CUDA_CHECK(cudaHostGetDevicePointer(&d, p, 0));
    r.host = host;
    r.device = static_cast<DeviceErrorRecord*>(d);
  }
  return r;
}

}  // namespace

void note_host_wait() { g_waits.fetch_add(1, std::memory_order_relaxed); }
void note_readback() { g_readbacks.fetch_add(1, std::memory_order_relaxed); }
std::uint64_t host_waits() { return g_waits.load(std::memory_order_relaxed); }
std::uint64_t readbacks() { return g_readbacks.load(std::memory_order_relaxed); }

DeviceErrorRecord* device_error_record(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  return record_locked(device).device;
}

void raise_device_error(int device) {
  DeviceErrorRecord r{};
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (device < 0 || static_cast<std::size_t>(device) >= g_records.size()) return;
    DeviceErrorRecord* h = g_records[static_cast<std::size_t>(device)].host;
    if (h == nullptr) return;
    // The kernels' writes are visible once the host has waited for them; volatile keeps the
    // compiler from reusing an older read.
    volatile DeviceErrorRecord* v = h;
    r.code = v->code;
    if (r.code == kDeviceErrorNone) return;
    r.a = v->a;
    r.b = v->b;
    r.c = v->c;
    v->code = kDeviceErrorNone;
  }
  const std::string at = detail::str_cat(" (found by a kernel on cuda:", device,
                                         ", reported at the next wait for it)");
  switch (r.code) {
    case kDeviceErrorCrossEntropyTarget:
      fail("cross_entropy", "target ", r.b, " at row ", r.a, " is out of range for ", r.c,
           " classes", at);
    case kDeviceErrorEmbeddingIndex:
      fail("embedding", "id ", r.b, " at position ", r.a, " is out of range for a table of ", r.c,
           " rows", at);
    default:
      fail("cuda", "unknown device error code ", r.code, at);
  }
}

}  // namespace anvil::cuda
