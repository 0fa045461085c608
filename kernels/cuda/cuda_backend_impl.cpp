// SPDX-License-Identifier: Apache-2.0
// anvil::CudaBackend over the CUDA runtime API: device discovery, per-device stream and caching
// allocator, copies between host and devices. The engine dlopen()s this library on first GPU
// use and calls the exported anvil_cuda_backend() (Note [Lazy CUDA loading]).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/core/cuda_backend.h"
#include "engine/core/error.h"
#include "kernels/cuda/cuda_allocator.h"
#include "kernels/cuda/copy_kernels.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_guard.h"
#include "kernels/cuda/host_staging.h"
#include "kernels/cuda/host_waits.h"
#include "kernels/cuda/pinned_host_allocator.h"
#include "kernels/cuda/nccl_collectives.h"
#include "kernels/cuda/register.h"

#ifndef ANVIL_CUDA_ARCHS
#define ANVIL_CUDA_ARCHS "?"
#endif

namespace anvil::cuda {
namespace {

// "13.0" from CUDA's 13000 encoding.
std::string version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

struct DeviceState {
  explicit DeviceState(int device) : allocator(device) {}
  CudaCachingAllocator allocator;
  HostStaging staging;  // pinned buffers of host <-> device copies (Note [Pinned staging])
  std::mutex mu;        // guards the lazily filled fields below
  cudaStream_t stream = nullptr;
  // The asynchronous input pipeline (copy_to_device_async): its own stream and two events.
  cudaStream_t copy_stream = nullptr;
  cudaEvent_t copies_done = nullptr;  // recorded on copy_stream after each async copy
  cudaEvent_t queued_mark = nullptr;  // recorded on `stream` before each async copy
  std::string name;
  std::string description;    // "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)"
  std::string kernel_status;  // "" until the probe ran, then "ok" or the error
};

class CudaBackendImpl final : public CudaBackend {
 public:
  CudaBackendImpl() {
    // Without a GPU the call returns error 35 (insufficient driver) and leaves the count
    // unwritten (TOOLCHAIN.md): start from 0 and treat any error as "no device".
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      count = 0;
      no_device_reason_ = "cudaGetDeviceCount failed with " + status_text(status);
      if (status == cudaErrorInsufficientDriver || status == cudaErrorNoDevice)
        no_device_reason_ +=
            ": no NVIDIA GPU/driver on this machine, or a driver older than "
            "the CUDA runtime";
    } else if (count <= 0) {
      count = 0;
      no_device_reason_ = "cudaGetDeviceCount reports 0 devices";
    }
    for (int d = 0; d < count; ++d) devices_.push_back(std::make_unique<DeviceState>(d));
  }
  // Never destroyed (leaked by anvil_cuda_backend()): destroying streams after the CUDA
  // runtime has shut down at process exit fails.

  int device_count() override { return static_cast<int>(devices_.size()); }

  std::string device_name(int device) override {
    DeviceState& s = state(device, "CudaBackend::device_name");
    std::lock_guard<std::mutex> lock(s.mu);
    fill_properties_locked(s, device);
    return s.name;
  }

  std::string version() override {
    int runtime = 0, driver = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) (void)cudaGetLastError();
    if (cudaDriverGetVersion(&driver) != cudaSuccess) (void)cudaGetLastError();
    std::string v = "CUDA runtime " + version_text(runtime) + ", driver " +
                    (driver > 0 ? version_text(driver) : std::string("none")) +
                    ", kernels built for " + ANVIL_CUDA_ARCHS;
    if (devices_.empty()) return v + "; 0 devices: " + no_device_reason_;
    for (int d = 0; d < device_count(); ++d) {
      DeviceState& s = *devices_[d];
      std::lock_guard<std::mutex> lock(s.mu);
      try {
        fill_properties_locked(s, d);
        v += "; cuda:" + std::to_string(d) + " " + s.description;
      } catch (const Error& e) {
        v += "; cuda:" + std::to_string(d) + " unavailable: " + e.what();
      }
      if (!s.kernel_status.empty() && s.kernel_status != "ok")
        v += " (custom kernels do not run: " + s.kernel_status + ")";
    }
    return v;
  }

  Allocator& allocator(int device) override {
    return state(device, "CudaBackend::allocator").allocator;
  }

  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            std::size_t bytes) override {
    if (bytes == 0) return;
    ANVIL_CHECK(dst != nullptr && src != nullptr, "CudaBackend::copy", "null pointer (dst ", dst,
                ", src ", src, ") for ", bytes, " bytes");
    if (dst_device.is_cpu() && src_device.is_cpu()) {
      std::memmove(dst, src, bytes);
      return;
    }
    // Host <-> device: large pageable buffers go through pinned staging (Note [Pinned staging]).
    if (src_device.is_cpu()) {  // host -> device
      const int d = dst_device.index;
      cudaStream_t s = get_stream(d, "CudaBackend::copy");
      DeviceGuard guard(d);
      state(d, "CudaBackend::copy").staging.to_device(dst, src, bytes, s);
      note_host_wait();
      raise_device_error(d);
      return;
    }
    if (dst_device.is_cpu()) {  // device -> host; earlier work on the stream finishes first
      const int d = src_device.index;
      cudaStream_t s = get_stream(d, "CudaBackend::copy");
      DeviceGuard guard(d);
      state(d, "CudaBackend::copy").staging.to_host(dst, src, bytes, s);
      note_host_wait();
      note_readback();
      raise_device_error(d);
      return;
    }
    if (dst_device.index == src_device.index) {
      const int d = dst_device.index;
      cudaStream_t s = get_stream(d, "CudaBackend::copy");
      DeviceGuard guard(d);
      ANVIL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
      ANVIL_CUDA_CHECK(cudaStreamSynchronize(s));
      note_host_wait();
      raise_device_error(d);
      return;
    }
    // Between two devices: the source's pending work must finish before the peer copy, which
    // runs on the destination's stream.
    cudaStream_t src_stream = get_stream(src_device.index, "CudaBackend::copy");
    cudaStream_t dst_stream = get_stream(dst_device.index, "CudaBackend::copy");
    {
      DeviceGuard guard(src_device.index);
      ANVIL_CUDA_CHECK(cudaStreamSynchronize(src_stream));
    }
    DeviceGuard guard(dst_device.index);
    ANVIL_CUDA_CHECK(
        cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, bytes, dst_stream));
    ANVIL_CUDA_CHECK(cudaStreamSynchronize(dst_stream));
    note_host_wait();
    note_host_wait();
    raise_device_error(src_device.index);
    raise_device_error(dst_device.index);
  }

  void synchronize(int device) override {
    state(device, "CudaBackend::synchronize");
    // The whole device, not only anvil's stream: libraries may use internal streams.
    DeviceGuard guard(device);
    ANVIL_CUDA_CHECK(cudaDeviceSynchronize());
    note_host_wait();
    raise_device_error(device);
  }

  double time_on_stream(int device, const std::function<void()>& enqueue) override {
    cudaStream_t s = get_stream(device, "CudaBackend::time_on_stream");
    DeviceGuard guard(device);
    cudaEvent_t start = nullptr, stop = nullptr;
    ANVIL_CUDA_CHECK(cudaEventCreate(&start));
    // The events are destroyed on every path, also when `enqueue` throws.
    struct Events {
      cudaEvent_t a, *b;
      ~Events() {
        cudaEventDestroy(a);
        if (*b != nullptr) cudaEventDestroy(*b);
      }
    } events{start, &stop};
    ANVIL_CUDA_CHECK(cudaEventCreate(&stop));
    ANVIL_CUDA_CHECK(cudaEventRecord(start, s));
    enqueue();
    ANVIL_CUDA_CHECK(cudaEventRecord(stop, s));
    ANVIL_CUDA_CHECK(cudaEventSynchronize(stop));
    note_host_wait();
    raise_device_error(device);
    float ms = 0.0f;
    ANVIL_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms) * 1e-3;
  }

  void copy_on_device(int device, const std::int64_t* sizes, int ndim, StridedView dst,
                      StridedView src) override {
    cudaStream_t s = get_stream(device, "CudaBackend::copy_on_device");
    DeviceGuard guard(device);
    strided_copy(s, sizes, ndim, {dst.data, dst.strides, dst.dtype},
                 {src.data, src.strides, src.dtype});
  }

  void fill_on_device(int device, const std::int64_t* sizes, int ndim, StridedView dst,
                      double value) override {
    cudaStream_t s = get_stream(device, "CudaBackend::fill_on_device");
    DeviceGuard guard(device);
    strided_fill(s, sizes, ndim, {dst.data, dst.strides, dst.dtype}, value);
  }

  SyncCounts sync_counts() override { return {host_waits(), readbacks()}; }

  Allocator& pinned_host_allocator() override { return pinned_; }

  void copy_to_device_async(int device, void* dst, const void* src, std::size_t bytes) override {
    if (bytes == 0) return;
    ANVIL_CHECK(dst != nullptr && src != nullptr, "CudaBackend::copy_to_device_async",
                "null pointer (dst ", dst, ", src ", src, ") for ", bytes, " bytes");
    cudaStream_t s = get_stream(device, "CudaBackend::copy_to_device_async");
    DeviceState& st = copy_state(device);
    DeviceGuard guard(device);
    // dst may still be read by kernels queued on the compute stream: the copy waits for them
    // on the device (Note [Pinned batches]).
    ANVIL_CUDA_CHECK(cudaEventRecord(st.queued_mark, s));
    ANVIL_CUDA_CHECK(cudaStreamWaitEvent(st.copy_stream, st.queued_mark, 0));
    ANVIL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, st.copy_stream));
    ANVIL_CUDA_CHECK(cudaEventRecord(st.copies_done, st.copy_stream));
  }

  void wait_for_copies(int device) override {
    cudaStream_t s = get_stream(device, "CudaBackend::wait_for_copies");
    DeviceState& st = copy_state(device);
    DeviceGuard guard(device);
    // An event never recorded counts as complete, so a wait before the first copy is a no-op.
    ANVIL_CUDA_CHECK(cudaStreamWaitEvent(s, st.copies_done, 0));
  }

  // NCCL (kernels/cuda/nccl_collectives.cpp).
  std::string nccl_unique_id() override { return nccl::unique_id(); }
  std::string pci_bus_id(int device) override {
    state(device, "CudaBackend::pci_bus_id");  // checks the index
    char id[64] = {0};
    ANVIL_CUDA_CHECK(cudaDeviceGetPCIBusId(id, sizeof id, device));
    return id;
  }
  std::unique_ptr<DeviceCollectives> create_collectives(int device, int rank, int size,
                                                        const std::string& unique_id) override {
    return nccl::create_collectives(get_stream(device, "CudaBackend::create_collectives"), device,
                                    rank, size, unique_id);
  }

  // The device's stream (cuda_context.h), created with the first use of the device.
  cudaStream_t get_stream(int device, const char* where) {
    DeviceState& s = state(device, where);
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.stream == nullptr) {
      DeviceGuard guard(device);
      cudaStream_t created = nullptr;
      ANVIL_CUDA_CHECK(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
      s.stream = created;
      // Learn now, with a clear message, whether our compiled kernels run on this GPU; copies
      // and library kernels (cuBLAS, cuDNN) work either way, so this is recorded, not thrown.
      const cudaError_t probe = launch_probe_kernel(created);
      if (probe != cudaSuccess) (void)cudaGetLastError();
      s.kernel_status = probe == cudaSuccess ? "ok" : status_text(probe);
    }
    return s.stream;
  }

 private:
  // The copy stream and events of `device`, created on first use.
  DeviceState& copy_state(int device) {
    DeviceState& s = state(device, "CudaBackend::copy_state");
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.copy_stream == nullptr) {
      DeviceGuard guard(device);
      ANVIL_CUDA_CHECK(cudaEventCreateWithFlags(&s.copies_done, cudaEventDisableTiming));
      ANVIL_CUDA_CHECK(cudaEventCreateWithFlags(&s.queued_mark, cudaEventDisableTiming));
      cudaStream_t created = nullptr;
      ANVIL_CUDA_CHECK(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
      s.copy_stream = created;
    }
    return s;
  }

  DeviceState& state(int device, const char* where) {
    ANVIL_CHECK(device >= 0 && device < device_count(), where, "no CUDA device cuda:", device, " (",
                device_count(), " device(s) present)");
    return *devices_[static_cast<std::size_t>(device)];
  }

  static void fill_properties_locked(DeviceState& s, int device) {
    if (!s.name.empty()) return;
    cudaDeviceProp prop{};
    ANVIL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    s.name = prop.name;
    const double gib = static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
    char mem[32];
    std::snprintf(mem, sizeof mem, "%.1f", gib);
    s.description = s.name + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
                    ", " + mem + " GiB)";
  }

  std::vector<std::unique_ptr<DeviceState>> devices_;
  PinnedHostAllocator pinned_;
  std::string no_device_reason_;
};

CudaBackendImpl& instance() {
  // Leaked on purpose: tensors in static objects may outlive main(), and the CUDA runtime must
  // not be called from static destructors.
  static auto* backend = new CudaBackendImpl();
  return *backend;
}

}  // namespace

cudaStream_t stream(int device) { return instance().get_stream(device, "cuda::stream"); }

}  // namespace anvil::cuda

extern "C" __attribute__((visibility("default"))) anvil::CudaBackend* anvil_cuda_backend() {
  // The CUDA variants join the engine's tables whether or not a device is present: listing them
  // needs no GPU, and a problem on a device that does not exist never reaches them.
  anvil::cuda::register_cuda_kernels();
  return &anvil::cuda::instance();
}
