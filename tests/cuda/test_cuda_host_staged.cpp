// SPDX-License-Identifier: Apache-2.0
// Host-staged device collectives (Note [Host-staged device collectives]): under `mpirun -np 2`
// on one GPU (CTest dist_host_staged_gpu, gpu_kit.sh run --dist), both ranks share cuda:0, and
// data-parallel training of mlp_mnist on two halves of a batch equals one process on the whole
// batch, on the GPU. Hidden tag: a plain run of test_cuda_runtime (one process) leaves it out.
// The CPU side of the staging is in tests/distributed/test_dist_training.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "anvil/anvil.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/distributed/data_parallel.h"
#include "engine/distributed/host_staged.h"
#include "models/training_step.h"

using namespace anvil;

namespace {
std::vector<double> host_values(const Tensor& t) {
  const Tensor h = t.to(Device::cpu()).to(DType::f64).contiguous();
  return std::vector<double>(h.data<double>(), h.data<double>() + h.numel());
}
}  // namespace

TEST_CASE("host-staged data parallel: 2 ranks on one GPU equal one process on the global batch",
          "[.staged][cuda]") {
  auto comm = dist::host_staged(dist::create_communicator("mpi"));
  REQUIRE(comm->size() == 2);
  REQUIRE(comm->cuda_device() == 0);  // one GPU: both ranks on it
  const Device gpu = Device::cuda(comm->cuda_device());
  const auto& info = models::info("mlp_mnist");
  std::unique_ptr<ForceVariant> force;  // one GEMM variant for both runs
  if (gemm_table().find("cuda.cublas") != nullptr)
    force = std::make_unique<ForceVariant>("gemm", "cuda.cublas");
  constexpr std::int64_t kBatch = 32;
  Generator gen(6);
  const models::Batch batch = models::synthetic_batch(info, kBatch, gen);  // the same on both
  auto run = [&](bool parallel) {
    models::ModelOptions mo;
    mo.seed = 5;
    nn::ModulePtr net = models::create("mlp_mnist", mo);
    net->to(gpu);
    Tensor x = batch.input, y = batch.target;
    if (parallel) {  // this rank's half of the batch
      const std::int64_t half = kBatch / 2, begin = comm->rank() * half;
      x = x.slice(0, begin, begin + half).contiguous();
      y = y.slice(0, begin, begin + half).contiguous();
    }
    x = x.to(gpu);
    y = y.to(gpu);
    optim::SGD opt(net->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    std::unique_ptr<dist::DataParallel> dp;
    if (parallel) {
      dp = std::make_unique<dist::DataParallel>(comm, net->parameters(),
                                                dist::DataParallelOptions{.bucket_cap_mb = 0.25});
      REQUIRE(dp->num_buckets() > 1);
      dp->broadcast_from_root(net->parameters());
      dp->prepare_optimizer(opt);
    }
    net->train(false);  // no dropout: both runs compute the same gradients
    for (int step = 0; step < 5; ++step) {
      opt.zero_grad();
      models::model_loss(info, net->forward(x), y).backward();
      if (dp) dp->finish_gradients();
      opt.step();
    }
    std::vector<double> values;
    for (const Tensor& p : net->parameters()) {
      const std::vector<double> v = host_values(p.detach());
      values.insert(values.end(), v.begin(), v.end());
    }
    return values;
  };
  const std::vector<double> single = run(false);
  const std::vector<double> parallel = run(true);
  REQUIRE(single.size() == parallel.size());
  double worst = 0;
  for (std::size_t i = 0; i < single.size(); ++i)
    worst = std::max(worst, std::abs(single[i] - parallel[i]));
  // See Note [Data-parallel tolerance]: only where the batch mean is rounded differs.
  INFO("max |DP - single| after 5 steps: " << worst);
  CHECK(worst <= 1e-5);
  // And every rank holds the same model.
  const std::size_t n = parallel.size();
  const Tensor all =
      comm->all_gather(Tensor::from_vector(parallel, {static_cast<std::int64_t>(n)}));
  const double* p = all.data<double>();
  std::size_t differ = 0;
  for (std::size_t i = 0; i < n; ++i) differ += p[i] != p[n + i];
  CHECK(differ == 0);
}
