// SPDX-License-Identifier: Apache-2.0
// The nccl communicator on one GPU, under `mpirun -np 1` (CTest dist_nccl; gpu_kit.sh run --dist):
// all-reduce (sum, average, max), broadcast and all-gather of CUDA tensors through NCCL at sizes
// 0, 1, odd and larger than a gradient bucket, several in flight, host tensors over MPI; and data
// parallelism over one GPU rank (gradient buckets averaged by NCCL) equal to plain training on the
// GPU. Needs a GPU (gpu_main.cpp: exit 77, "SKIPPED: <reason>" without one).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "engine/core/cuda_backend.h"
#include "tests/distributed/dist_test_util.h"

using namespace anvil;

namespace {

dist::CommunicatorPtr nccl() {
  static dist::CommunicatorPtr c = dist::create_communicator("nccl");
  return c;
}

// i % 97 + 0.5 as `d` (exact in every dtype the communicator takes).
Tensor host_values(DType d, std::int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<double>(i % 97);
  return Tensor::from_vector(v, {n}).to(d);
}

bool same_values(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device::cpu()).to(DType::f64).contiguous();
  const Tensor y = b.to(Device::cpu()).to(DType::f64).contiguous();
  if (x.numel() != y.numel()) return false;
  for (std::int64_t i = 0; i < x.numel(); ++i)
    if (x.data<double>()[i] != y.data<double>()[i]) return false;
  return true;
}

}  // namespace

TEST_CASE("nccl communicator on one GPU: context line", "[dist][nccl]") {
  auto c = nccl();
  REQUIRE(c->size() == 1);
  REQUIRE(c->rank() == 0);
  REQUIRE(c->backend() == "nccl");
  INFO(c->version());
  REQUIRE(c->version().find("NCCL") != std::string::npos);
  REQUIRE(c->version().find("on cuda:0") != std::string::npos);
}

TEST_CASE("nccl all_reduce, broadcast, all_gather of CUDA tensors on one rank", "[dist][nccl]") {
  auto c = nccl();
  const Device gpu = Device::cuda(0);
  for (DType d : {DType::f32, DType::f64, DType::i64}) {
    const std::int64_t bucket = 25 * 1048576 / static_cast<std::int64_t>(dtype_size(d));
    for (std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{1001}, bucket + 3}) {
      INFO(dtype_name(d) << " x " << n);
      const Tensor expected = host_values(d, n);
      // Written by the compute stream just before the collective: the collective stream must
      // wait for it (Note [Collective stream ordering]).
      for (dist::ReduceOp op :
           {dist::ReduceOp::sum, dist::ReduceOp::average, dist::ReduceOp::max}) {
        if (op == dist::ReduceOp::average && d == DType::i64) continue;
        Tensor t = expected.to(gpu);
        c->all_reduce(t, op);
        REQUIRE(t.device() == gpu);
        REQUIRE(same_values(t, expected));
      }
      Tensor b = expected.to(gpu);
      c->broadcast(b, 0);
      REQUIRE(same_values(b, expected));
      Tensor gathered = c->all_gather(expected.to(gpu));
      REQUIRE(gathered.device() == gpu);
      REQUIRE(same_values(gathered, expected));
    }
  }
}

TEST_CASE("nccl: several all_reduces in flight, host tensors over MPI, wrong device refused",
          "[dist][nccl]") {
  auto c = nccl();
  const Device gpu = Device::cuda(0);
  std::vector<Tensor> ts;
  std::vector<dist::WorkPtr> works;
  for (int i = 0; i < 8; ++i) {
    ts.push_back(Tensor::full({4099}, 1.5 + i, DType::f32, gpu));
    works.push_back(c->all_reduce_async(ts.back(), dist::ReduceOp::sum));
  }
  for (auto& w : works) w->wait();
  for (int i = 0; i < 8; ++i) REQUIRE(same_values(ts[i], Tensor::full({4099}, 1.5 + i)));
  // A host tensor goes over the MPI bootstrap communicator (metrics, timings).
  REQUIRE(c->all_reduce_scalar(2.5, dist::ReduceOp::max) == 2.5);
  c->barrier();
  if (cuda_backend()->device_count() < 2) {
    WARN("one GPU: the refusal of a tensor on another GPU is not checked here");
  } else {
    Tensor other = Tensor::ones({3}, DType::f32, Device::cuda(1));
    REQUIRE_THROWS_WITH(c->all_reduce(other, dist::ReduceOp::sum),
                        Catch::Contains("this rank's communicator is on cuda:0"));
  }
}

TEST_CASE("data parallel over one GPU rank (nccl buckets) equals plain training on the GPU",
          "[dist][nccl]") {
  const auto d = test::synthetic_data(32, 3);
  const Device gpu = Device::cuda(0);
  auto run = [&](bool dp_on) {
    auto net = test::small_mlp(7);
    net->to(gpu);
    optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
    std::unique_ptr<dist::DataParallel> dp;
    if (dp_on) {
      // A small bucket cap: several buckets, started during backward (overlap) by the hooks.
      dp = std::make_unique<dist::DataParallel>(nccl(), net->parameters(),
                                                dist::DataParallelOptions{.bucket_cap_mb = 0.001});
      REQUIRE(dp->num_buckets() > 1);
      dp->broadcast_from_root(net->parameters());
      dp->prepare_optimizer(opt);
    }
    for (int step = 0; step < 4; ++step) {
      opt.zero_grad();
      cross_entropy(net->forward(test::rows(d.x, step * 8, 8).to(gpu)),
                    test::rows(d.y, step * 8, 8).to(gpu))
          .backward();
      if (dp) dp->finish_gradients();
      opt.step();
    }
    net->to(Device::cpu());
    return test::flat_values(*net);
  };
  const std::vector<double> with = run(true), without = run(false);
  REQUIRE(with.size() == without.size());
  double worst = 0;
  for (std::size_t i = 0; i < with.size(); ++i)
    worst = std::max(worst, std::abs(with[i] - without[i]));
  INFO("largest parameter difference " << worst);
  // Average over one rank is x * 1 (exact); prepare_optimizer turns folded SGD off, so the
  // update order may differ from the plain run by rounding only.
  REQUIRE(worst <= 1e-6);
}
