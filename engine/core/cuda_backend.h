// SPDX-License-Identifier: Apache-2.0
#pragma once
// The seam between the engine and the optional CUDA backend library (libanvil_cuda.so).
//
// Note [Lazy CUDA loading]
// Loading cudart + cuBLAS + cuDNN costs about 220 MB of resident memory and up to 1 s, so the
// engine never links them. The backend is a shared library of its own that implements
// CudaBackend; cuda_backend() dlopen()s it on the first GPU request (a CUDA tensor, a device
// query) and caches the result. When the library or a GPU is missing, cuda_backend() returns
// nullptr and cuda_unavailable_reason() says why; CPU work never triggers the load.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/core/allocator.h"
#include "engine/core/device_collectives.h"
#include "engine/core/dtype.h"

namespace anvil {

class CudaBackend {
 public:
  virtual ~CudaBackend() = default;
  virtual int device_count() = 0;
  virtual std::string device_name(int device) = 0;
  virtual std::string version() = 0;  // "CUDA runtime 13.0, driver 13.0, cuBLAS ..."
  virtual Allocator& allocator(int device) = 0;
  // Copies `bytes` between any two of host memory and device memory, then waits for it.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device,
                    std::size_t bytes) = 0;
  virtual void synchronize(int device) = 0;

  // Seconds of GPU time taken by the work that `enqueue` puts on the device's stream, measured
  // with CUDA events recorded before and after it (benchmarks' manual time). Waits for the work.
  virtual double time_on_stream(int device, const std::function<void()>& enqueue) = 0;

  // A strided view of device memory: `ndim` sizes shared by both operands of a call, strides in
  // elements, `data` pointing at the first element.
  struct StridedView {
    void* data = nullptr;
    const std::int64_t* strides = nullptr;
    DType dtype = DType::f32;
  };
  // dst = src converted to dst's dtype, element by element over `sizes`, both on `device`;
  // runs on the device's stream (ordered with the kernels, not waited for).
  virtual void copy_on_device(int device, const std::int64_t* sizes, int ndim, StridedView dst,
                              StridedView src) = 0;
  // Every element of dst over `sizes` = value converted to dst's dtype, on the device's stream.
  virtual void fill_on_device(int device, const std::int64_t* sizes, int ndim, StridedView dst,
                              double value) = 0;

  // How often the host has waited for a device, and how many of those waits were device -> host
  // copies, since the backend loaded (all devices together). Note [Host waits in a step]
  // (kernels/cuda/host_waits.h): a GPU training step should add exactly one wait, its end.
  struct SyncCounts {
    std::uint64_t host_waits = 0;
    std::uint64_t readbacks = 0;
  };
  virtual SyncCounts sync_counts() = 0;

  // ---- the asynchronous input pipeline (Note [Pinned batches] in data/loader.h) ----
  // Page-locked host memory (cudaHostAlloc), cached by size: tensors on the CPU whose copies to
  // a GPU are real DMA, asynchronous to the host. Device::cpu() reports it as host memory.
  virtual Allocator& pinned_host_allocator() = 0;
  // Enqueues dst (device memory of `device`) = src (host memory) on the device's copy stream
  // and returns at once. The copy starts after all work queued so far on the device's stream
  // (kernels may still read dst's old contents). `src` must stay unchanged until the copy is
  // done: wait_for_copies() + a later wait, or the end of the step. Pageable `src` works but
  // the driver stages it before returning.
  virtual void copy_to_device_async(int device, void* dst, const void* src, std::size_t bytes) = 0;
  // Makes the work queued on the device's stream from now on wait for every
  // copy_to_device_async() issued so far (a device-side wait; the host does not block).
  virtual void wait_for_copies(int device) = 0;

  // NCCL (engine/core/device_collectives.h): the 128-byte unique id rank 0 creates and every
  // rank receives over MPI, then one communicator per rank on `device`. Throw anvil::Error when
  // the library was built without NCCL or NCCL fails.
  virtual std::string nccl_unique_id() = 0;
  // "0000:19:00.0": tells ranks on one host apart by GPU (Note [One GPU per rank]).
  virtual std::string pci_bus_id(int device) = 0;
  virtual std::unique_ptr<DeviceCollectives> create_collectives(int device, int rank, int size,
                                                                const std::string& unique_id) = 0;
};

// Name of the C entry point the backend library exports: `anvil::CudaBackend*
// anvil_cuda_backend()`.
inline constexpr const char* kCudaBackendEntry = "anvil_cuda_backend";

// Loads the backend on first call (thread-safe); nullptr when no usable GPU or library.
CudaBackend* cuda_backend();
// True when the backend loaded and reports at least one device.
bool cuda_available();
// Why cuda_backend() is null ("" when it is not).
std::string cuda_unavailable_reason();
// The backend or an anvil::Error naming `where` and the reason.
CudaBackend& require_cuda(const char* where);

}  // namespace anvil
