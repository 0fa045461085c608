// SPDX-License-Identifier: Apache-2.0
// The "nccl" communicator: collectives over CUDA tensors through NCCL in libanvil_cuda.so
// (engine/core/device_collectives.h), bootstrapped over the MPI world (rank 0's unique id is
// broadcast as 16 int64 values). Host tensors (metrics, timings) go through the MPI communicator,
// so callers use one communicator for both. Refuses before touching MPI when there is no GPU.
#include <cstdlib>
#include <cstring>

#include "engine/core/config.h"
#include "engine/core/cuda_backend.h"
#include "engine/core/error.h"
#include "engine/distributed/communicator.h"

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
  std::string version() const override {
    return c_->version() + " on cuda:" + std::to_string(device_) + ", bootstrap " + mpi_->version();
  }
  WorkPtr all_reduce_async(Tensor& t, ReduceOp op) override {
    check_collective("nccl all_reduce", t, op, true);
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

CommunicatorPtr create_nccl_communicator() {
  constexpr const char* kWhere = "create_communicator(\"nccl\")";
  // The GPU check comes first, so a machine without one refuses before MPI starts.
  CudaBackend* cuda = cuda_backend();
  ANVIL_CHECK(cuda != nullptr, kWhere,
              "the nccl backend needs a CUDA GPU: ", cuda_unavailable_reason(),
              "; use --dist mpi for CPU training");
  CommunicatorPtr mpi = create_mpi_for_bootstrap();
  // One GPU per rank on a node: the node-local rank picks it.
  const std::string local = env_or_empty("OMPI_COMM_WORLD_LOCAL_RANK");
  const int device =
      (local.empty() ? mpi->rank() : std::atoi(local.c_str())) % cuda->device_count();
  Tensor id = Tensor::zeros({16}, DType::i64);  // 128 bytes
  if (mpi->rank() == 0) {
    const std::string uid = cuda->nccl_unique_id();
    ANVIL_CHECK(uid.size() == 128, kWhere, "NCCL unique id of ", uid.size(), " bytes");
    std::memcpy(id.data_ptr(), uid.data(), uid.size());
  }
  mpi->broadcast(id, 0);
  const std::string uid(static_cast<const char*>(id.data_ptr()), 128);
  return std::make_shared<NcclCommunicator>(
      mpi, device, cuda->create_collectives(device, mpi->rank(), mpi->size(), uid));
}

}  // namespace anvil::dist
