// SPDX-License-Identifier: Apache-2.0
// Device collectives staged through the host (Note [Host-staged device collectives]).
#include "engine/distributed/host_staged.h"

#include <string>
#include <utility>
#include <vector>

#include "engine/core/cuda_backend.h"
#include "engine/core/error.h"
#include "engine/distributed/nccl_placement.h"

namespace anvil::dist {
namespace {

constexpr const char* kWhere = "host-staged collectives";

// A host collective in flight and where its result goes: the host buffers it works on stay
// alive here; the result is copied into `target` once, when the host collective is complete.
class StagedWork final : public Work {
 public:
  StagedWork(WorkPtr inner, Tensor host_in, Tensor host_out, Tensor target)
      : inner_(std::move(inner)),
        host_in_(std::move(host_in)),
        host_out_(std::move(host_out)),
        target_(std::move(target)) {}
  bool test() override {
    if (!inner_->test()) return false;
    copy_back();
    return true;
  }
  void wait() override {
    inner_->wait();
    copy_back();
  }

 private:
  void copy_back() {
    if (copied_) return;
    target_.copy_(host_out_);
    copied_ = true;
  }
  WorkPtr inner_;
  Tensor host_in_, host_out_, target_;
  bool copied_ = false;
};

class HostStagedCommunicator final : public Communicator {
 public:
  HostStagedCommunicator(CommunicatorPtr host, int device, bool stage_host_tensors)
      : host_(std::move(host)), device_(device), stage_host_(stage_host_tensors) {}
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string backend() const override { return host_->backend(); }
  int cuda_device() const override { return device_; }
  std::string version() const override {
    return "host-staged over " + host_->version() +
           (device_ >= 0 ? " on cuda:" + std::to_string(device_) : std::string());
  }
  std::string all_reduce_algorithm(std::int64_t bytes) const override {
    return "host-staged " + host_->all_reduce_algorithm(bytes);
  }
  WorkPtr all_reduce_async(Tensor& t, ReduceOp op) override {
    check_all_reduce("host-staged all_reduce", t, op);
    if (!staged(t, "all_reduce")) return host_->all_reduce_async(t, op);
    Tensor host = to_host(t);
    WorkPtr inner = host_->all_reduce_async(host, op);
    return std::make_shared<StagedWork>(std::move(inner), Tensor(), host, t);
  }
  WorkPtr broadcast_async(Tensor& t, int root) override {
    check_collective("host-staged broadcast", t, ReduceOp::sum, false);
    if (!staged(t, "broadcast")) return host_->broadcast_async(t, root);
    Tensor host = to_host(t);
    WorkPtr inner = host_->broadcast_async(host, root);
    return std::make_shared<StagedWork>(std::move(inner), Tensor(), host, t);
  }
  WorkPtr all_gather_async(const Tensor& in, Tensor& out) override {
    check_collective("host-staged all_gather", in, ReduceOp::sum, false);
    if (!staged(in, "all_gather")) return host_->all_gather_async(in, out);
    check_on_device("all_gather", out);
    ANVIL_CHECK(
        out.is_contiguous() && out.dtype() == in.dtype() && out.numel() == in.numel() * size(),
        "host-staged all_gather", "output must be contiguous ", dtype_name(in.dtype()), " of ",
        in.numel() * size(), " elements, got ", out.numel());
    Tensor host_in = to_host(in);
    Tensor host_out = Tensor::empty({out.numel()}, out.dtype());
    WorkPtr inner = host_->all_gather_async(host_in, host_out);
    return std::make_shared<StagedWork>(std::move(inner), host_in, host_out, out);
  }
  WorkPtr reduce_scatter_async(const Tensor& in, Tensor& out, ReduceOp op) override {
    check_reduce_scatter("host-staged reduce_scatter", in, out, op, size());
    if (!staged(in, "reduce_scatter")) return host_->reduce_scatter_async(in, out, op);
    Tensor host_in = to_host(in);
    Tensor host_out = Tensor::empty({out.numel()}, out.dtype());
    WorkPtr inner = host_->reduce_scatter_async(host_in, host_out, op);
    return std::make_shared<StagedWork>(std::move(inner), host_in, host_out, out);
  }
  void barrier() override { host_->barrier(); }
  void progress() override { host_->progress(); }
  void abort(int code) override { host_->abort(code); }

 private:
  // Whether `t` goes through the host copies; a CUDA tensor must be on this rank's GPU.
  bool staged(const Tensor& t, const char* op) const {
    if (t.device().is_cuda()) {
      check_on_device(op, t);
      return true;
    }
    return stage_host_;
  }
  void check_on_device(const char* op, const Tensor& t) const {
    ANVIL_CHECK(t.device() == Device::cuda(device_) || (stage_host_ && t.device().is_cpu()), kWhere,
                op, ": tensor on ", t.device(), ", this rank's GPU is cuda:", device_);
  }
  // A host copy of t that the collective may overwrite (a CUDA tensor's copy waits for the
  // compute stream's writes).
  static Tensor to_host(const Tensor& t) {
    return t.device().is_cuda() ? t.to(Device::cpu()).contiguous() : t.clone();
  }

  CommunicatorPtr host_;
  int device_ = -1;
  bool stage_host_ = false;
};

// Node-local rank modulo the visible GPUs (Note [One GPU per rank]; sharing is allowed here).
int place_on_gpu(Communicator& host) {
  CudaBackend* cuda = cuda_backend();
  ANVIL_CHECK(cuda != nullptr, kWhere, "need a CUDA GPU: ", cuda_unavailable_reason());
  const int visible = cuda->device_count();
  ANVIL_CHECK(visible > 0, kWhere, "need a CUDA GPU: none is visible");
  return node_local_rank(gather_host_ids(host), host.rank()) % visible;
}

}  // namespace

CommunicatorPtr host_staged(CommunicatorPtr host, HostStagedOptions options) {
  ANVIL_CHECK(host != nullptr, kWhere, "no host communicator");
  ANVIL_CHECK(host->cuda_device() < 0, kWhere, "the ", host->backend(),
              " communicator moves device memory itself; staging is for host backends");
  const int device = options.device >= 0          ? options.device
                     : options.stage_host_tensors ? -1  // the test seam: no GPU involved
                                                  : place_on_gpu(*host);
  return std::make_shared<HostStagedCommunicator>(std::move(host), device,
                                                  options.stage_host_tensors);
}

}  // namespace anvil::dist
