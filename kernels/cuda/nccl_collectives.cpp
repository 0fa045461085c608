// SPDX-License-Identifier: Apache-2.0
// NCCL collectives for the "nccl" communicator (nccl_collectives.h): all-reduce (sum, average as
// ncclAvg, max), broadcast and all-gather over device memory on a stream of their own, ordered
// against the compute stream by events (Note [Collective stream ordering]); wait() polls the
// completion event and ncclCommGetAsyncError up to a timeout, then marks the communicator failed
// (Note [NCCL failure without ncclCommAbort]).
#include "kernels/cuda/nccl_collectives.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <cstring>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_guard.h"

#if ANVIL_HAVE_NCCL
#include <dlfcn.h>
#include <nccl.h>

#include <mutex>
#endif

namespace anvil::cuda::nccl {

#if ANVIL_HAVE_NCCL
namespace {

// Note [Lazy NCCL loading]
// libnccl.so.2 is dlopen()ed on the first NCCL call, not linked: a GPU machine whose NCCL comes
// from elsewhere (PyTorch's nvidia-nccl wheel, docs/cuda.md) or is missing still loads
// libanvil_cuda.so for everything else, and only the nccl backend says what is missing. The
// header gives the function types; ANVIL_NCCL_LIBRARY overrides the file name.
struct NcclApi {
  decltype(&::ncclGetErrorString) get_error_string = nullptr;
  decltype(&::ncclGetLastError) get_last_error = nullptr;
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclGetVersion) get_version = nullptr;
  decltype(&::ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclCommAbort) comm_abort = nullptr;
  decltype(&::ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclBroadcast) broadcast = nullptr;
  decltype(&::ncclAllGather) all_gather = nullptr;
};

constexpr int kMinVersion = 21300;  // NCCL_VERSION(2, 13, 0)

const NcclApi& api() {
  static std::once_flag once;
  static NcclApi a;
  static std::string failure;
  std::call_once(once, [] {
    const char* env = std::getenv("ANVIL_NCCL_LIBRARY");
    const std::string name = env != nullptr && *env != '\0' ? env : "libnccl.so.2";
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* err = dlerror();
      failure = "cannot load " + name + " (" + (err ? err : "?") +
                "); put NCCL 2 on LD_LIBRARY_PATH or set ANVIL_NCCL_LIBRARY";
      return;
    }
    auto sym = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, symbol));
      if (fn == nullptr && failure.empty()) failure = name + " has no " + symbol;
    };
    // The version first: an older library lacks symbols (ncclGetLastError is 2.13's) or the
    // operations used here (ncclAvg is 2.10's), and should say so rather than "has no ...".
    sym(a.get_version, "ncclGetVersion");
    int v = 0;
    if (failure.empty() && (a.get_version(&v) != ncclSuccess || v < kMinVersion)) {
      failure =
          detail::str_cat(name, " is NCCL version code ", v, "; anvil needs NCCL 2.13 or later");
      return;
    }
    sym(a.get_error_string, "ncclGetErrorString");
    sym(a.get_last_error, "ncclGetLastError");
    sym(a.get_unique_id, "ncclGetUniqueId");
    sym(a.comm_init_rank, "ncclCommInitRank");
    sym(a.comm_destroy, "ncclCommDestroy");
    sym(a.comm_abort, "ncclCommAbort");
    sym(a.comm_get_async_error, "ncclCommGetAsyncError");
    sym(a.all_reduce, "ncclAllReduce");
    sym(a.broadcast, "ncclBroadcast");
    sym(a.all_gather, "ncclAllGather");
  });
  ANVIL_CHECK(failure.empty(), "nccl", failure);
  return a;
}

void check_nccl(ncclResult_t r, const char* call, const char* file, int line) {
  if (r == ncclSuccess) return;
  // ncclGetLastError ignores its argument (the last error is per process) and may return null.
  const char* last = api().get_last_error(nullptr);
  throw Error(detail::str_cat("nccl: ", call, " failed with ", api().get_error_string(r), " (",
                              static_cast<int>(r), ") at ", short_path(file), ":", line, ": ",
                              last != nullptr ? last : ""));
}
#define ANVIL_NCCL_CHECK(call) check_nccl((call), #call, __FILE__, __LINE__)

// 2.28.9 is 22809 (NCCL_VERSION's encoding from 2.9 on).
std::string version_text(int v) {
  return detail::str_cat("NCCL ", v / 10000, ".", (v / 100) % 100, ".", v % 100);
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
    case DType::bf16:
      return ncclBfloat16;
    case DType::f16:
      return ncclFloat16;
  }
  throw Error("nccl: unsupported dtype");
}

ncclRedOp_t nccl_op(DeviceCollectives::Op op) {
  switch (op) {
    case DeviceCollectives::Op::sum:
      return ncclSum;
    case DeviceCollectives::Op::average:
      return ncclAvg;  // NCCL >= 2.10
    case DeviceCollectives::Op::max:
      return ncclMax;
  }
  return ncclSum;
}

class NcclCollectives final : public DeviceCollectives {
 public:
  NcclCollectives(cudaStream_t compute, int device, int rank, int size, const std::string& id)
      : compute_(compute), device_(device), rank_(rank) {
    ANVIL_CHECK(id.size() == sizeof(ncclUniqueId), "nccl::create_collectives", "unique id of ",
                id.size(), " bytes, expected ", sizeof(ncclUniqueId));
    DeviceGuard guard(device);
    ncclUniqueId uid;
    std::memcpy(&uid, id.data(), sizeof uid);
    ANVIL_NCCL_CHECK(api().comm_init_rank(&comm_, size, uid, rank));
    // A constructor that throws runs no destructor: free what was made before rethrowing.
    try {
      ANVIL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      ANVIL_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    } catch (...) {
      if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
      (void)api().comm_destroy(comm_);
      throw;
    }
  }
  ~NcclCollectives() override {
    // A destructor must not throw: when the device cannot be made current (DeviceGuard throws,
    // e.g. while the CUDA runtime unloads at exit), the handles are left to the process's end.
    try {
      DeviceGuard guard(device_);
      for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
      for (auto& [ticket, e] : pending_) (void)cudaEventDestroy(e);
      (void)cudaEventDestroy(ready_);
      if (!aborted_ && !failed_) (void)api().comm_destroy(comm_);
      (void)cudaStreamDestroy(stream_);
    } catch (...) {}
  }

  std::uint64_t all_reduce(void* data, std::int64_t count, DType dtype, Op op) override {
    if (count == 0) return end();  // Note [Empty collectives]
    DeviceGuard guard(device_);    // the NCCL call itself runs on the communicator's device
    begin();
    ANVIL_NCCL_CHECK(api().all_reduce(data, data, static_cast<std::size_t>(count), nccl_type(dtype),
                                      nccl_op(op), comm_, stream_));
    return end();
  }
  std::uint64_t broadcast(void* data, std::int64_t count, DType dtype, int root) override {
    if (count == 0) return end();
    DeviceGuard guard(device_);  // the NCCL call itself runs on the communicator's device
    begin();
    ANVIL_NCCL_CHECK(api().broadcast(data, data, static_cast<std::size_t>(count), nccl_type(dtype),
                                     root, comm_, stream_));
    return end();
  }
  std::uint64_t all_gather(const void* in, void* out, std::int64_t count, DType dtype) override {
    if (count == 0) return end();
    DeviceGuard guard(device_);  // the NCCL call itself runs on the communicator's device
    begin();
    ANVIL_NCCL_CHECK(api().all_gather(in, out, static_cast<std::size_t>(count), nccl_type(dtype),
                                      comm_, stream_));
    return end();
  }
  bool query(std::uint64_t ticket) override {
    const auto it = pending_.find(ticket);
    if (it == pending_.end()) return true;  // already waited for
    const cudaError_t s = cudaEventQuery(it->second);
    if (s == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    ANVIL_CUDA_CHECK(s);
    return true;
  }
  void wait(std::uint64_t ticket, double timeout_seconds) override {
    ANVIL_CHECK(!aborted_ && !failed_, "nccl wait",
                "the communicator is unusable after an earlier error");
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::duration<double>(timeout_seconds);
    while (!query(ticket)) {
      ncclResult_t async = ncclSuccess;
      ANVIL_NCCL_CHECK(api().comm_get_async_error(comm_, &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        failed_ = true;
        throw Error(detail::str_cat("nccl wait: rank ", rank_, ": asynchronous NCCL error ",
                                    api().get_error_string(async)));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        failed_ = true;
        throw Error(detail::str_cat("nccl wait: rank ", rank_, ": collective not complete after ",
                                    timeout_seconds,
                                    " s (ANVIL_DIST_TIMEOUT); a peer rank may have died or "
                                    "stalled"));
      }
      // Note [Polling a collective]: yield while it is young, then sleep between polls.
      if (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(2))
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    const auto it = pending_.find(ticket);
    if (it == pending_.end()) return;
    DeviceGuard guard(device_);
    ANVIL_CUDA_CHECK(cudaStreamWaitEvent(compute_, it->second, 0));
    free_.push_back(it->second);  // the wait captured the event's state: it may be re-recorded
    pending_.erase(it);
  }
  std::string version() const override {
    int v = 0;
    api().get_version(&v);
    return version_text(v);
  }
  void abort() override { abort_comm(); }

 private:
  // Note [Empty collectives]
  // An operation of 0 elements (the interface allows any size, and an empty tensor's data
  // pointer may be null) enqueues nothing: every rank has the same count, so every rank skips
  // it, and its ticket is a completion event on the collective stream like any other.
  //
  // Note [Polling a collective]
  // wait() returns only once the collective is complete (the host watches for NCCL's
  // asynchronous errors and the timeout meanwhile, as PyTorch's watchdog does), so its polling
  // interval adds to every blocking call: a 50 us sleep alone would dominate a one-rank or
  // small-message all-reduce (a few us on the GPU). The first 2 ms of a wait yield instead.
  //
  // The collective stream waits for the compute stream's work so far.
  void begin() {
    ANVIL_CHECK(!aborted_ && !failed_, "nccl",
                "the communicator is unusable after an earlier error");
    DeviceGuard guard(device_);
    ANVIL_CUDA_CHECK(cudaEventRecord(ready_, compute_));
    ANVIL_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
  }
  // A completion event for the operation just enqueued; events go back to free_ once waited for.
  std::uint64_t end() {
    DeviceGuard guard(device_);
    cudaEvent_t e = nullptr;
    if (!free_.empty()) {
      e = free_.back();
      free_.pop_back();
    } else {
      ANVIL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    ANVIL_CUDA_CHECK(cudaEventRecord(e, stream_));
    pending_.emplace(next_ticket_, e);
    return next_ticket_++;
  }
  // Note [NCCL failure without ncclCommAbort]
  // A timeout or an asynchronous error used to call ncclCommAbort here, on this rank alone. With
  // recent NCCL that call can itself hang while the peers do not abort too (NVIDIA/nccl#863:
  // within a node every rank has to abort; #1777 hangs in commFree), and a peer that stalled
  // never will, so the error would never reach the user. The communicator is only marked failed:
  // later calls throw, the destructor leaves it to the process's end (ncclCommDestroy would wait
  // for the work in flight), and the program ends the job (Communicator::abort: MPI_Abort on
  // several ranks, Note [Failing fast across ranks]). abort() is the explicit ncclCommAbort.
  void abort_comm() {
    if (!aborted_) (void)api().comm_abort(comm_);
    aborted_ = true;
  }

  cudaStream_t compute_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  std::unordered_map<std::uint64_t, cudaEvent_t> pending_;  // ticket -> completion event
  std::vector<cudaEvent_t> free_;
  std::uint64_t next_ticket_ = 0;
  ncclComm_t comm_ = nullptr;
  int device_ = 0, rank_ = 0;
  bool aborted_ = false;
  // A timeout or an asynchronous error (Note [NCCL failure without ncclCommAbort]).
  bool failed_ = false;
};

}  // namespace

std::string library_version() {
  int v = 0;
  ANVIL_NCCL_CHECK(api().get_version(&v));
  return version_text(v);
}

std::string unique_id() {
  ncclUniqueId uid;
  ANVIL_NCCL_CHECK(api().get_unique_id(&uid));
  return std::string(uid.internal, sizeof uid.internal);
}

std::unique_ptr<DeviceCollectives> create_collectives(cudaStream_t compute, int device, int rank,
                                                      int size, const std::string& id) {
  return std::make_unique<NcclCollectives>(compute, device, rank, size, id);
}

#else  // built without NCCL

std::string library_version() { return unique_id(); }

std::string unique_id() {
  throw Error(
      "nccl: libanvil_cuda was built without NCCL (libnccl.so not found at configure time)");
}
std::unique_ptr<DeviceCollectives> create_collectives(cudaStream_t, int, int, int,
                                                      const std::string&) {
  return (unique_id(), nullptr);
}

#endif

}  // namespace anvil::cuda::nccl

// For tests/cuda/test_cuda_lazy_load.cpp (no GPU needed): loads libnccl.so.2 as --dist nccl does
// and resolves every symbol of the table. Returns 0 and "NCCL 2.28.9", or -1 and the error.
extern "C" __attribute__((visibility("default"))) int anvil_nccl_library_version(char* out,
                                                                                 int size) {
  int rc = 0;
  std::string text;
  try {
    text = anvil::cuda::nccl::library_version();
  } catch (const std::exception& e) {
    rc = -1;
    text = e.what();
  }
  if (size > 0) std::snprintf(out, static_cast<std::size_t>(size), "%s", text.c_str());
  return rc;
}
