// SPDX-License-Identifier: Apache-2.0
// The "nccl" communicator on one GPU and one process (Note [NCCL without MPI on one process]):
// every collective and dtype on device memory at sizes 0, 1, odd and larger than a gradient
// bucket, several in flight, the event ordering against the compute stream (Note [Collective
// stream ordering]), and data parallelism over one NCCL rank being plain training on the GPU,
// bit for bit. Also run under `mpirun -np 1` (CTest dist_nccl, gpu_kit.sh run --dist). Needs a GPU
// and libnccl.so.2 (gpu_main.cpp skips without a GPU; a missing NCCL fails with the loader's
// message, since the GPU kit promises it).
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "anvil/anvil.h"
#include "engine/core/cuda_backend.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/distributed/data_parallel.h"
#include "models/training_step.h"

using namespace anvil;

namespace {
const Device kGpu = Device::cuda(0);

std::vector<double> host_values(const Tensor& t) {
  const Tensor h = t.to(Device::cpu()).to(DType::f64).contiguous();
  return std::vector<double>(h.data<double>(), h.data<double>() + h.numel());
}

// i % 97 as `d` on the host (exact in every dtype the communicator takes).
Tensor pattern(DType d, std::int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<double>(i % 97);
  return Tensor::from_vector(v, {n}).to(d);
}
}  // namespace

TEST_CASE("nccl communicator on one GPU: collectives, dtypes and stream ordering", "[cuda][nccl]") {
  const dist::CommunicatorPtr comm = dist::create_communicator("nccl");
  REQUIRE(comm->backend() == "nccl");
  REQUIRE(comm->size() == 1);
  REQUIRE(comm->rank() == 0);
  REQUIRE(comm->cuda_device() == 0);
  CHECK_THAT(comm->version(), Catch::Contains("NCCL 2.") && Catch::Contains("on cuda:0") &&
                                  Catch::Contains("bootstrap single process"));
  INFO(comm->version());

  // The input is written by compute-stream kernels just before the collective, and the result
  // is read by a compute-stream kernel just after: NCCL's stream must wait for the first and
  // the compute stream for NCCL (a 1-rank all-gather is a real copy on NCCL's stream).
  const std::int64_t n = 1 << 22;
  Tensor in = Tensor::full({n}, 1.0, DType::f32, kGpu);
  for (int i = 0; i < 8; ++i) in = in * 1.5 + 0.25;
  double expected = 1.0;
  for (int i = 0; i < 8; ++i) expected = expected * 1.5 + 0.25;
  Tensor out = Tensor::zeros({n}, DType::f32, kGpu);
  comm->all_gather_async(in, out)->wait();
  const Tensor total = sum(out * 2.0);
  CHECK(total.item() == Approx(2.0 * expected * static_cast<double>(n)).epsilon(1e-5));
  const std::vector<double> head = host_values(out.slice(0, 0, 4));
  for (double v : head) CHECK(v == Approx(expected).epsilon(1e-6));

  // Sum, average (ncclAvg) and max over one rank are the identity, per dtype.
  Tensor f = Tensor::full({1000}, 3.25, DType::f32, kGpu);
  comm->all_reduce(f, dist::ReduceOp::average);
  CHECK(host_values(f)[999] == 3.25);
  Tensor d = Tensor::full({7}, -2.5, DType::f64, kGpu);
  comm->all_reduce(d, dist::ReduceOp::sum);
  CHECK(host_values(d)[6] == -2.5);
  Tensor l = Tensor::full({5}, 41.0, DType::i64, kGpu);
  comm->all_reduce(l, dist::ReduceOp::max);
  CHECK(host_values(l)[4] == 41.0);
  Tensor b = Tensor::full({3}, 9.0, DType::f32, kGpu);
  comm->broadcast(b, 0);
  CHECK(host_values(b)[2] == 9.0);
  // Empty tensors (Note [Empty collectives]) and host tensors (over the bootstrap).
  Tensor e = Tensor::empty({0}, DType::f32, kGpu);
  comm->all_reduce(e, dist::ReduceOp::average);
  CHECK(comm->all_reduce_scalar(4.5, dist::ReduceOp::sum) == 4.5);
  // Waiting twice is allowed; refusals name the problem.
  dist::WorkPtr w = comm->all_reduce_async(f, dist::ReduceOp::sum);
  w->wait();
  w->wait();
  CHECK(w->test());
  REQUIRE_THROWS_WITH(comm->broadcast(b, 1), Catch::Contains("root 1 outside [0, 1)"));
  Tensor i32 = Tensor::zeros({2}, DType::i32, kGpu);
  REQUIRE_THROWS_WITH(comm->all_reduce(i32), Catch::Contains("is not supported"));
}

TEST_CASE("nccl on one GPU: every op and dtype at sizes 0, 1, odd and above a bucket, in flight",
          "[cuda][nccl]") {
  const dist::CommunicatorPtr comm = dist::create_communicator("nccl");
  for (DType d : {DType::f32, DType::f64, DType::i64}) {
    const std::int64_t bucket = 25 * 1048576 / static_cast<std::int64_t>(dtype_size(d));
    for (std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{1001}, bucket + 3}) {
      INFO(dtype_name(d) << " x " << n);
      const Tensor expected = pattern(d, n);
      const std::vector<double> want = host_values(expected);
      for (dist::ReduceOp op :
           {dist::ReduceOp::sum, dist::ReduceOp::average, dist::ReduceOp::max}) {
        if (op == dist::ReduceOp::average && d == DType::i64) continue;
        Tensor t = expected.to(kGpu);
        comm->all_reduce(t, op);
        REQUIRE(t.device() == kGpu);
        REQUIRE(host_values(t) == want);
      }
      Tensor b = expected.to(kGpu);
      comm->broadcast(b, 0);
      REQUIRE(host_values(b) == want);
      Tensor gathered = Tensor::zeros({n}, d, kGpu);
      comm->all_gather_async(expected.to(kGpu), gathered)->wait();
      REQUIRE(host_values(gathered) == want);
    }
  }
  // Several all-reduces in flight at once, waited in order.
  std::vector<Tensor> ts;
  std::vector<dist::WorkPtr> works;
  for (int i = 0; i < 8; ++i) {
    ts.push_back(Tensor::full({4099}, 1.5 + i, DType::f32, kGpu));
    works.push_back(comm->all_reduce_async(ts.back(), dist::ReduceOp::sum));
  }
  for (auto& w : works) w->wait();
  for (int i = 0; i < 8; ++i) CHECK(host_values(ts[static_cast<std::size_t>(i)])[4098] == 1.5 + i);
  comm->barrier();
}

TEST_CASE("data parallel over one NCCL rank is plain GPU training, bit for bit", "[cuda][nccl]") {
  const auto& info = models::info("mlp_mnist");
  // One GEMM variant for both runs, whatever autotune would pick.
  std::unique_ptr<ForceVariant> force;
  if (gemm_table().find("cuda.cublas") != nullptr)
    force = std::make_unique<ForceVariant>("gemm", "cuda.cublas");
  auto run = [&](bool dp_on) {
    models::ModelOptions mo;
    mo.seed = 5;
    nn::ModulePtr net = models::create("mlp_mnist", mo);
    Generator gen(6);
    models::Batch batch = models::synthetic_batch(info, 32, gen);
    net->to(kGpu);
    const Tensor x = batch.input.to(kGpu), y = batch.target.to(kGpu);
    optim::Adam opt(net->parameters(), optim::AdamOptions{});
    std::unique_ptr<dist::DataParallel> dp;
    if (dp_on) {
      // Small buckets: several all-reduces overlap backward (Note [Gradient buckets]).
      dp =
          std::make_unique<dist::DataParallel>(dist::create_communicator("nccl"), net->parameters(),
                                               dist::DataParallelOptions{.bucket_cap_mb = 0.25});
      REQUIRE(dp->num_buckets() > 1);
      dp->broadcast_from_root(net->parameters());
      dp->prepare_optimizer(opt);
    }
    net->train(false);  // no dropout: both runs compute the same gradients
    std::vector<double> losses;
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      Tensor loss = models::model_loss(info, net->forward(x), y);
      loss.backward();
      if (dp) dp->finish_gradients();
      opt.step();
      losses.push_back(loss.item());
    }
    std::vector<double> values = losses;
    for (const Tensor& p : net->parameters()) {
      const std::vector<double> v = host_values(p.detach());
      values.insert(values.end(), v.begin(), v.end());
    }
    return values;
  };
  const std::vector<double> plain = run(false);
  const std::vector<double> parallel = run(true);
  REQUIRE(plain.size() == parallel.size());
  std::size_t differing = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) differing += plain[i] != parallel[i];
  CHECK(differing == 0);
}
