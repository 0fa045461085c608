// SPDX-License-Identifier: Apache-2.0
// Under `mpirun -np 2` (CTest dist_mpi): data-parallel training (engine/distributed/
// data_parallel.h) against one process on the global batch, bitwise reproducibility (run to run,
// across ranks, with or without overlap, any bucket size), checkpoint/resume under 2 ranks, and
// the bad configurations of `anvil train` under MPI.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <unistd.h>

#include "data/loader.h"
#include "engine/optim/checkpoint.h"
#include "tests/distributed/dist_test_util.h"
#include "tools/anvil/trainer.h"

using namespace anvil;

namespace {

constexpr std::int64_t kSamples = 72;  // 4 global batches of 16 and a last one of 8
constexpr std::int64_t kGlobalBatch = 16;

dist::CommunicatorPtr world() { return dist::create_communicator("mpi"); }

std::unique_ptr<optim::Optimizer> make_sgd(nn::Module& net) {
  return std::make_unique<optim::SGD>(net.parameters(),
                                      optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
}

// One process on the global batch: `epochs` epochs of the synthetic set.
std::vector<double> train_single(int epochs) {
  auto net = test::small_mlp(7);
  auto opt = make_sgd(*net);
  const auto d = test::synthetic_data(kSamples, 3);
  data::DataLoader loader({d.x, d.y}, {.batch = kGlobalBatch, .seed = 5, .background = false});
  for (int e = 0; e < epochs; ++e) {
    loader.start_epoch(e);
    while (auto b = loader.next()) {
      opt->zero_grad();
      cross_entropy(net->forward(b->inputs), b->targets).backward();
      opt->step();
    }
  }
  return test::flat_values(*net);
}

struct DpRun {
  int first_epoch = 0, last_epoch = 2;  // epochs [first, last)
  dist::DataParallelOptions options;
  std::string resume, save;  // checkpoint paths
};

// The same training on this rank's shard; every rank starts from a different initialisation,
// so only the broadcast from rank 0 makes them agree.
std::vector<double> train_dp(dist::Communicator& comm, const DpRun& run) {
  auto c = dist::create_communicator("mpi");
  auto net = test::small_mlp(7 + 100 * static_cast<std::uint64_t>(comm.rank()));
  auto opt = make_sgd(*net);
  dist::DataParallel dp(c, net->parameters(), run.options);
  dp.broadcast_from_root(net->parameters());
  dp.prepare_optimizer(*opt);
  if (!run.resume.empty()) optim::load_checkpoint(run.resume, *net, opt.get());
  const auto d = test::synthetic_data(kSamples, 3);
  data::DataLoader loader({d.x, d.y}, {.batch = kGlobalBatch / comm.size(),
                                       .seed = 5,
                                       .background = false,
                                       .num_shards = comm.size(),
                                       .shard = comm.rank()});
  for (int e = run.first_epoch; e < run.last_epoch; ++e) {
    loader.start_epoch(e);
    while (auto b = loader.next()) {
      opt->zero_grad();
      cross_entropy(net->forward(b->inputs), b->targets).backward();
      dp.finish_gradients();
      opt->step();
    }
  }
  if (!run.save.empty()) {
    if (comm.rank() == 0) optim::save_checkpoint(run.save, *net, opt.get(), {});
    comm.barrier();
  }
  return test::flat_values(*net);
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Every rank's vector equals rank 0's, bit for bit.
bool same_on_all_ranks(dist::Communicator& comm, const std::vector<double>& v) {
  const Tensor t = Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())});
  const Tensor all = comm.all_gather(t);
  const double* p = all.data<double>();
  for (int r = 1; r < comm.size(); ++r)
    for (std::size_t i = 0; i < v.size(); ++i)
      if (p[r * v.size() + i] != p[i]) return false;
  return true;
}

std::string shared_temp_path(dist::Communicator& comm, const char* name) {
  Tensor id =
      Tensor::from_vector(std::vector<std::int64_t>{static_cast<std::int64_t>(getpid())}, {1});
  comm.broadcast(id, 0);
  return (std::filesystem::temp_directory_path() /
          ("anvil_dist_" + std::to_string(id.data<std::int64_t>()[0]) + "_" + name))
      .string();
}

}  // namespace

// Note [Data-parallel tolerance]: the only difference from one process is where the rounding of
// the batch mean happens (Note [Data-parallel determinism]); after 10 SGD-momentum steps the
// parameters (|p| < 1) agree within 1e-5 (measured: printed below, 2.98e-08 on 2026-11-25).
TEST_CASE("data parallel on 2 ranks equals one process on the global batch", "[dist]") {
  auto comm = world();
  REQUIRE(comm->size() == 2);
  const auto single = train_single(2);
  const auto dp = train_dp(*comm, {});
  const double diff = max_abs_diff(single, dp);
  if (comm->rank() == 0) std::printf("max |DP - single| after 10 steps: %.3g\n", diff);
  REQUIRE(diff <= 1e-5);
  REQUIRE(same_on_all_ranks(*comm, dp));
}

TEST_CASE("data parallel is bitwise reproducible, with or without overlap, any bucket size",
          "[dist]") {
  auto comm = world();
  const auto a = train_dp(*comm, {});
  const auto b = train_dp(*comm, {});
  REQUIRE(a == b);
  DpRun no_overlap;
  no_overlap.options.overlap = false;
  REQUIRE(train_dp(*comm, no_overlap) == a);
  DpRun tiny;
  tiny.options.bucket_cap_mb = 0.001;  // one bucket per parameter
  REQUIRE(train_dp(*comm, tiny) == a);
}

TEST_CASE("data parallel buckets: reverse registration order, cap, folded SGD turned off",
          "[dist]") {
  auto comm = world();
  auto net = test::small_mlp(1);
  const auto params = net->parameters();  // w1 b1 w2 b2 w3 b3
  // 1 KiB cap, from the last parameter: [b3 w3 b2] (596 B), [w2] (3 KiB, alone), [b1], [w1].
  dist::DataParallel dp(comm, params, {.bucket_cap_mb = 1.0 / 1024});
  REQUIRE(dp.num_buckets() == 4);
  REQUIRE(dp.bucket_bytes(0) == (5 + 24 * 5 + 24) * 4);
  REQUIRE(dp.bucket_bytes(1) == 32 * 24 * 4);
  optim::SGD sgd(params, 0.1);
  sgd.fold_into_backward();
  dist::DataParallel dp2(comm, params);
  REQUIRE(dp2.num_buckets() == 1);
  dp2.prepare_optimizer(sgd);
  REQUIRE_FALSE(sgd.folded());
  REQUIRE(dp2.notes().size() >= 1);
  REQUIRE(dp2.notes().back().find("folded SGD off") != std::string::npos);
}

TEST_CASE("checkpoint and resume under 2 ranks equals an uninterrupted run", "[dist]") {
  auto comm = world();
  const std::string path = shared_temp_path(*comm, "resume.safetensors");
  const auto whole = train_dp(*comm, {.first_epoch = 0, .last_epoch = 3});
  train_dp(*comm, {.first_epoch = 0, .last_epoch = 1, .save = path});
  const auto resumed = train_dp(*comm, {.first_epoch = 1, .last_epoch = 3, .resume = path});
  comm->barrier();
  if (comm->rank() == 0) std::filesystem::remove(path);
  REQUIRE(resumed == whole);
}

TEST_CASE("anvil train under mpi: a batch the ranks do not divide is refused before any work",
          "[dist]") {
  auto comm = world();
  tools::TrainConfig c;
  c.model = "mlp_mnist";
  c.dataset = "/nonexistent";  // never read: the check comes first
  c.batch = 81;
  c.dist = "mpi";
  std::ostringstream out;
  REQUIRE_THROWS_WITH(tools::run_training(c, out),
                      Catch::Contains("--batch 81 is not divisible by the 2 ranks"));
}
