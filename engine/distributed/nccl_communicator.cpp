// SPDX-License-Identifier: Apache-2.0
// The "nccl" communicator: collectives over CUDA tensors through NCCL in libanvil_cuda.so
// (engine/core/device_collectives.h), bootstrapped over the MPI world (rank 0's unique id is
// broadcast as 16 int64 values), or over nothing for one process outside a multi-rank launch
// (Note [NCCL without MPI on one process]). Host tensors (metrics, timings) go through the
// bootstrap communicator, so callers use one communicator for both. Refuses before touching MPI
// when there is no GPU, and before ncclCommInitRank when two ranks share a GPU.

#include <cstring>

#include "engine/core/cuda_backend.h"
#include "engine/core/error.h"
#include "engine/distributed/communicator.h"
#include "engine/distributed/nccl_placement.h"

namespace anvil::dist {

CommunicatorPtr create_mpi_for_bootstrap();  // communicator.cpp

namespace {

DeviceCollectives::Op device_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return DeviceCollectives::Op::sum;
    case ReduceOp::average:
      return DeviceCollectives::Op::average;
    case ReduceOp::max:
      return DeviceCollectives::Op::max;
  }
  return DeviceCollectives::Op::sum;
}

class NcclWork final : public Work {
 public:
  NcclWork(DeviceCollectives& c, std::uint64_t ticket) : c_(c), ticket_(ticket) {}
  bool test() override { return c_.query(ticket_); }
  void wait() override { c_.wait(ticket_, collective_timeout_seconds()); }

 private:
  DeviceCollectives& c_;
  std::uint64_t ticket_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(CommunicatorPtr mpi, int device, std::unique_ptr<DeviceCollectives> c)
      : mpi_(std::move(mpi)), device_(device), c_(std::move(c)) {}
  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  std::string backend() const override { return "nccl"; }
  int cuda_device() const override { return device_; }
  std::string version() const override {
    return c_->version() + " on cuda:" + std::to_string(device_) + ", bootstrap " + mpi_->version();
  }
  WorkPtr all_reduce_async(Tensor& t, ReduceOp op) override {
    check_all_reduce("nccl all_reduce", t, op);
    if (t.device().is_cpu()) return mpi_->all_reduce_async(t, op);
    check_device("nccl all_reduce", t);
    return work(c_->all_reduce(t.data_ptr(), t.numel(), t.dtype(), device_op(op)));
  }
  WorkPtr broadcast_async(Tensor& t, int root) override {
    check_collective("nccl broadcast", t, ReduceOp::sum, false);
    if (t.device().is_cpu()) return mpi_->broadcast_async(t, root);
    check_device("nccl broadcast", t);
    ANVIL_CHECK(root >= 0 && root < size(), "nccl broadcast", "root ", root, " outside [0, ",
                size(), ")");
    return work(c_->broadcast(t.data_ptr(), t.numel(), t.dtype(), root));
  }
  WorkPtr all_gather_async(const Tensor& in, Tensor& out) override {
    check_collective("nccl all_gather", in, ReduceOp::sum, false);
    if (in.device().is_cpu()) return mpi_->all_gather_async(in, out);
    check_device("nccl all_gather", in);
    check_device("nccl all_gather", out);
    ANVIL_CHECK(
        out.is_contiguous() && out.dtype() == in.dtype() && out.numel() == in.numel() * size(),
        "nccl all_gather", "output must be contiguous ", dtype_name(in.dtype()), " of ",
        in.numel() * size(), " elements, got ", out.numel());
    return work(c_->all_gather(in.data_ptr(), out.data_ptr(), in.numel(), in.dtype()));
  }
  void barrier() override { mpi_->barrier(); }
  // Note [Failing fast across ranks]: on several ranks the bootstrap's MPI_Abort alone. It ends
  // every process, this one included, and the driver releases their GPU resources with them.
  // ncclCommAbort on one rank of a job whose peers do not abort too can itself hang: it may
  // wait for its peers inside commReclaim (NVIDIA/nccl#863, where NCCL's maintainer says that
  // within a node every rank has to abort; #1777, still open, hangs in commFree), and that
  // would keep the job alive. On one process there is nobody to wait for: the NCCL
  // communicator is aborted so that the exit that follows does not ncclCommDestroy one with
  // work in flight (which waits for that work), and this returns.
  void abort(int code) override {
    if (size() > 1) mpi_->abort(code);
    c_->abort();
  }

 private:
  void check_device(const char* op, const Tensor& t) const {
    ANVIL_CHECK(t.device() == Device::cuda(device_), op, "tensor on ", t.device(),
                ", this rank's communicator is on cuda:", device_);
  }
  WorkPtr work(std::uint64_t ticket) { return std::make_shared<NcclWork>(*c_, ticket); }

  CommunicatorPtr mpi_;
  int device_ = 0;
  std::unique_ptr<DeviceCollectives> c_;
};

}  // namespace

// Note [NCCL without MPI on one process]
// One process (no launcher, or `mpirun -np 1`) needs no bootstrap: it makes its own unique id
// and its host collectives are the single backend's identities. So `anvil train --dist nccl`
// runs on a GPU machine that has NCCL (PyTorch's wheel) but neither Open MPI nor
// libanvil_mpi.so, which is the case of the lent GPU machines (docs/cuda.md).
CommunicatorPtr create_nccl_communicator() {
  constexpr const char* kWhere = "create_communicator(\"nccl\")";
  // The GPU check comes first, so a machine without one refuses before MPI starts.
  CudaBackend* cuda = cuda_backend();
  ANVIL_CHECK(cuda != nullptr, kWhere,
              "the nccl backend needs a CUDA GPU: ", cuda_unavailable_reason(),
              "; use --dist mpi for CPU training");
  CommunicatorPtr boot =
      launcher_world_size() > 1 ? create_mpi_for_bootstrap() : create_communicator("single");
  // One GPU per rank on a node (Note [One GPU per rank]): the node-local rank picks it.
  const std::vector<std::int64_t> host_ids = gather_host_ids(*boot);
  const int visible = cuda->device_count();
  const int device = node_local_rank(host_ids, boot->rank()) % visible;
  const std::string bus_id = cuda->pci_bus_id(device);
  const Tensor gpus =
      boot->all_gather(Tensor::from_vector(std::vector<std::int64_t>{placement_hash(bus_id)}, {1}));
  const std::string duplicate =
      duplicate_gpu_message(host_ids,
                            std::vector<std::int64_t>(gpus.data<std::int64_t>(),
                                                      gpus.data<std::int64_t>() + boot->size()),
                            bus_id, visible);
  ANVIL_CHECK(duplicate.empty(), kWhere, "rank ", boot->rank(), " of ", boot->size(), ": ",
              duplicate);
  Tensor id = Tensor::zeros({16}, DType::i64);  // 128 bytes
  if (boot->rank() == 0) {
    const std::string uid = cuda->nccl_unique_id();
    ANVIL_CHECK(uid.size() == 128, kWhere, "NCCL unique id of ", uid.size(), " bytes");
    std::memcpy(id.data_ptr(), uid.data(), uid.size());
  }
  boot->broadcast(id, 0);
  // ncclCommInitRank blocks until every rank has joined, with no timeout of its own; a rank that
  // stalled before it would hold its peers there for ever. The bootstrap's barrier waits at most
  // the collective timeout (Note [Collective timeout]), so only ranks that all reached this line
  // enter NCCL's initialisation. (A broadcast alone is not enough: its root may finish before
  // the others receive.)
  boot->barrier();
  const std::string uid(static_cast<const char*>(id.data_ptr()), 128);
  return std::make_shared<NcclCommunicator>(
      boot, device, cuda->create_collectives(device, boot->rank(), boot->size(), uid));
}

}  // namespace anvil::dist
