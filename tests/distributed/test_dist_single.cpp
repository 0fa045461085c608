// SPDX-License-Identifier: Apache-2.0
// The distributed layer in one process (no mpirun): the single backend, backend selection and
// its errors (nccl without a GPU), post-accumulate-grad hooks, the sharded loader, and data
// parallelism over one rank being plain training.
#include <catch2/catch.hpp>

#include <fstream>
#include <optional>
#include <set>
#include <string>

#include "data/loader.h"
#include "engine/autograd/hooks.h"
#include "engine/core/cuda_backend.h"
#include "engine/distributed/handshake.h"
#include "engine/distributed/nccl_placement.h"
#include "tests/distributed/dist_test_util.h"

using namespace anvil;

namespace {
bool mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(name) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST_CASE("single communicator: identity collectives, no MPI loaded", "[dist]") {
  auto c = dist::create_communicator("auto");  // not under mpirun: single
  REQUIRE(c->backend() == "single");
  REQUIRE(c->describe() == "single rank 0/1");
  Tensor t = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  c->all_reduce(t, dist::ReduceOp::average);
  c->broadcast(t, 0);
  REQUIRE(t.data<float>()[2] == 3.0f);
  const Tensor g = c->all_gather(t);
  REQUIRE(g.numel() == 3);
  REQUIRE(g.data<float>()[1] == 2.0f);
  Tensor e = Tensor::empty({0});
  c->all_reduce(e);
  Tensor i = Tensor::zeros({2}, DType::i64);
  REQUIRE_THROWS_WITH(c->all_reduce(i, dist::ReduceOp::average),
                      Catch::Contains("average needs a floating dtype"));
  REQUIRE_FALSE(mapped("libmpi"));
  REQUIRE_FALSE(mapped("libanvil_mpi"));
}

TEST_CASE("configuration handshake on one rank, fingerprints", "[dist]") {
  auto single = dist::create_communicator("single");
  dist::agree_on_configuration(*single, {{"batch", "64", ""}});
  std::vector<dist::HandshakeField> many(dist::kHandshakeSlots, {"f", "v", ""});
  CHECK_THROWS_WITH(dist::agree_on_configuration(*single, many), Catch::Contains("at most 23"));
  // FNV-1a's published value for "a"; equal tensors, equal fingerprints.
  CHECK(dist::fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
  const Tensor a = Tensor::ones({5}), b = Tensor::ones({5});
  CHECK(dist::tensor_fingerprint(a) == dist::tensor_fingerprint(b));
  CHECK(dist::tensor_fingerprint(a) != dist::tensor_fingerprint(Tensor::zeros({5})));
  CHECK_THROWS_WITH(dist::file_fingerprint("/nonexistent/ck.safetensors"),
                    Catch::Contains("cannot read /nonexistent/ck.safetensors"));
}

TEST_CASE("create_communicator: unknown backend and nccl without a GPU are refused", "[dist]") {
  REQUIRE_THROWS_WITH(dist::create_communicator("gloo"),
                      Catch::Contains("unknown backend 'gloo'; expected single, mpi, nccl"));
  if (cuda_available()) {
    WARN("a GPU is present: the no-GPU refusal of the nccl backend is not checked here");
    return;
  }
  REQUIRE_THROWS_WITH(dist::create_communicator("nccl"),
                      Catch::Contains("the nccl backend needs a CUDA GPU"));
  REQUIRE_FALSE(mapped("libanvil_mpi"));  // refused before MPI was touched
}

TEST_CASE("nccl placement: node-local ranks and one GPU per rank", "[dist]") {
  const std::int64_t a = dist::placement_hash("node-a"), b = dist::placement_hash("node-b");
  REQUIRE(a == dist::placement_hash("node-a"));
  REQUIRE(a != b);
  REQUIRE(dist::placement_hash("0000:19:00.0") != dist::placement_hash("0000:1a:00.0"));
  // Ranks 0, 2 on node a and 1, 3 on node b (mpirun's round robin over two hosts).
  const std::vector<std::int64_t> hosts{a, b, a, b};
  REQUIRE(dist::node_local_rank(hosts, 0) == 0);
  REQUIRE(dist::node_local_rank(hosts, 1) == 0);
  REQUIRE(dist::node_local_rank(hosts, 2) == 1);
  REQUIRE(dist::node_local_rank(hosts, 3) == 1);
  REQUIRE_THROWS_WITH(dist::node_local_rank(hosts, 4), Catch::Contains("rank 4 outside [0, 4)"));
  const std::int64_t gpu0 = dist::placement_hash("0000:19:00.0");
  const std::int64_t gpu1 = dist::placement_hash("0000:1a:00.0");
  // One rank on one GPU (the lent GPU machine), and one GPU per rank on each of two hosts.
  REQUIRE(dist::duplicate_gpu_message({a}, {gpu0}, "0000:19:00.0", 1).empty());
  REQUIRE(dist::duplicate_gpu_message({a, b}, {gpu0, gpu0}, "0000:19:00.0", 1).empty());
  // CUDA_VISIBLE_DEVICES per rank: each process sees 1 GPU, device 0, but they differ.
  REQUIRE(dist::duplicate_gpu_message({a, a}, {gpu0, gpu1}, "0000:19:00.0", 1).empty());
  // Two ranks on a host with one GPU: refused, naming both ranks, before NCCL is asked.
  const std::string m = dist::duplicate_gpu_message({a, a}, {gpu0, gpu0}, "0000:19:00.0", 1);
  REQUIRE_THAT(m, Catch::Contains("ranks 0 and 1 are on the same host and the same GPU"));
  REQUIRE_THAT(m,
               Catch::Contains("1 GPU(s) visible per process; this rank's GPU: PCI 0000:19:00.0"));
  REQUIRE_THAT(m, Catch::Contains("NCCL needs one GPU per rank"));
  REQUIRE_THAT(dist::duplicate_gpu_message({a, b, a, b}, {gpu0, gpu0, gpu1, gpu1}, "x", 2),
               Catch::Equals(""));
  REQUIRE_THAT(dist::duplicate_gpu_message({a, b, a, b}, {gpu0, gpu0, gpu1, gpu0}, "x", 2),
               Catch::Contains("ranks 1 and 3 are on the same host"));
  REQUIRE_THROWS_WITH(dist::duplicate_gpu_message({a, b}, {gpu0}, "x", 1),
                      Catch::Contains("2 host ids but 1 GPU ids"));
}

TEST_CASE("post-accumulate-grad hook: once per backward, with the final gradient", "[dist]") {
  Tensor w = Tensor::from_vector(std::vector<float>{2, 3}, {2}).set_requires_grad();
  int calls = 0;
  std::vector<float> seen;
  const auto id = register_post_accumulate_grad_hook(w, [&](const Tensor& leaf) {
    ++calls;
    seen.assign(leaf.grad().data<float>(), leaf.grad().data<float>() + 2);
  });
  // w used twice: d/dw sum(w*w + 3w) = 2w + 3, summed from both uses before the hook runs.
  sum(w * w + w * 3.0).backward();
  REQUIRE(calls == 1);
  REQUIRE(seen == std::vector<float>{7, 9});
  remove_post_accumulate_grad_hook(w, id);
  sum(w * 2.0).backward();
  REQUIRE(calls == 1);
  Tensor y = w * 2.0;
  REQUIRE_THROWS_WITH(register_post_accumulate_grad_hook(y, [](const Tensor&) {}),
                      Catch::Contains("not a leaf"));
}

TEST_CASE("sharded loader: the shards of a global batch are that batch of one loader", "[dist]") {
  const std::int64_t n = 70;  // 4 global batches of 16, then 6 (split 3 + 3)
  Tensor x = Tensor::arange(static_cast<double>(n), DType::i64).reshape({n, 1});
  data::TensorDataset ds{x, x.flatten()};
  data::DataLoader whole(ds, {.batch = 16, .seed = 9, .background = false});
  data::DataLoader s0(ds,
                      {.batch = 8, .seed = 9, .background = false, .num_shards = 2, .shard = 0});
  data::DataLoader s1(ds, {.batch = 8, .seed = 9, .background = true, .num_shards = 2, .shard = 1});
  REQUIRE(s0.batches_per_epoch() == 5);
  for (int epoch = 0; epoch < 2; ++epoch) {
    whole.start_epoch(epoch);
    s0.start_epoch(epoch);
    s1.start_epoch(epoch);
    while (auto w = whole.next()) {
      auto a = s0.next(), b = s1.next();
      REQUIRE(a);
      REQUIRE(b);
      REQUIRE(a->targets.numel() == b->targets.numel());
      std::vector<std::int64_t> joined(a->targets.data<std::int64_t>(),
                                       a->targets.data<std::int64_t>() + a->targets.numel());
      joined.insert(joined.end(), b->targets.data<std::int64_t>(),
                    b->targets.data<std::int64_t>() + b->targets.numel());
      REQUIRE(joined ==
              std::vector<std::int64_t>(w->targets.data<std::int64_t>(),
                                        w->targets.data<std::int64_t>() + w->targets.numel()));
    }
    REQUIRE_FALSE(s0.next());
    REQUIRE_FALSE(s1.next());
  }
  // 69 samples: the last global batch of 5 cannot be split evenly and is left out.
  data::TensorDataset odd{x.slice(0, 0, 69).clone(), x.flatten().slice(0, 0, 69).clone()};
  data::DataLoader o(odd, {.batch = 8, .background = false, .num_shards = 2, .shard = 1});
  REQUIRE(o.batches_per_epoch() == 4);
  REQUIRE_THROWS_WITH(data::DataLoader(ds, {.batch = 8, .num_shards = 2, .shard = 2}),
                      Catch::Contains("shard 2 of 2 is not a shard"));
}

TEST_CASE("data parallel over one rank is plain training, bit for bit", "[dist]") {
  const auto d = test::synthetic_data(32, 3);
  auto run = [&](bool dp_on) {
    auto net = test::small_mlp(7);
    optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
    std::unique_ptr<dist::DataParallel> dp;
    if (dp_on)
      dp = std::make_unique<dist::DataParallel>(dist::create_communicator("single"),
                                                net->parameters(),
                                                dist::DataParallelOptions{.bucket_cap_mb = 0.001});
    for (int step = 0; step < 4; ++step) {
      opt.zero_grad();
      cross_entropy(net->forward(test::rows(d.x, step * 8, 8)), test::rows(d.y, step * 8, 8))
          .backward();
      if (dp) dp->finish_gradients();
      opt.step();
    }
    return test::flat_values(*net);
  };
  REQUIRE(run(true) == run(false));
}

// Note [bf16 gradient buckets] over one rank: the sum over one rank is the identity, so each
// averaged gradient is the plain gradient rounded once to bf16 (nearest even), bit for bit, in
// one bucket or several; and the parameters' gradients stay f32.
TEST_CASE("bf16 gradient buckets over one rank round each gradient once to bf16", "[dist]") {
  const auto d = test::synthetic_data(8, 3);
  for (const double cap : {25.0, 0.001}) {
    auto net = test::small_mlp(7);
    dist::DataParallel dp(dist::create_communicator("single"), net->parameters(),
                          {.bucket_cap_mb = cap, .grad_bucket_dtype = DType::bf16});
    REQUIRE_THAT(dp.describe(), Catch::Contains("bf16 on the wire"));
    cross_entropy(net->forward(d.x), d.y).backward();
    std::vector<Tensor> plain;
    for (const Tensor& p : net->parameters()) plain.push_back(p.grad().clone());
    dp.finish_gradients();
    std::int64_t off = 0, changed = 0;
    for (std::size_t k = 0; k < plain.size(); ++k) {
      const Tensor& g = net->parameters()[k].grad();
      REQUIRE(g.dtype() == DType::f32);
      for (std::int64_t i = 0; i < g.numel(); ++i) {
        const float want = BFloat16(plain[k].data<float>()[i]).to_float();
        if (g.data<float>()[i] != want) ++off;
        if (g.data<float>()[i] != plain[k].data<float>()[i]) ++changed;
      }
    }
    INFO("cap " << cap << " MiB: " << off << " element(s) off, " << changed << " rounded");
    REQUIRE(off == 0);
    REQUIRE(changed > 0);  // the gradients did go through bf16
  }
  REQUIRE_THROWS_WITH(
      dist::DataParallel(dist::create_communicator("single"), test::small_mlp(7)->parameters(),
                         {.shard_optimizer = true, .grad_bucket_dtype = DType::bf16}),
      Catch::Contains("bf16 gradient buckets with shard_optimizer"));
}

// See Note [Accumulation without synchronisation]: two micro-batches of 8, the first under no_sync,
// each loss weighted 1/2, equal one batch of 16. Without no_sync the first backward's hooks
// would mark the buckets filled and the second micro-batch's gradient would be lost.
TEST_CASE("no_sync: two micro-batches and one reduction equal one batch of both", "[dist]") {
  const auto d = test::synthetic_data(64, 3);
  auto run = [&](int micro_batches, bool sync_last) {
    auto net = test::small_mlp(7);
    optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
    dist::DataParallel dp(dist::create_communicator("single"), net->parameters(),
                          {.bucket_cap_mb = 0.001});
    const std::int64_t rows = 16 / micro_batches;
    for (int step = 0; step < 4; ++step) {
      opt.zero_grad();
      for (int i = 0; i < micro_batches; ++i) {
        std::optional<dist::DataParallel::NoSync> quiet;
        if (i + 1 < micro_batches || !sync_last) quiet.emplace(dp.no_sync());
        const std::int64_t begin = step * 16 + i * rows;
        (cross_entropy(net->forward(test::rows(d.x, begin, rows)), test::rows(d.y, begin, rows)) *
         (1.0 / micro_batches))
            .backward();
      }
      dp.finish_gradients();
      opt.step();
    }
    return test::flat_values(*net);
  };
  const auto whole = run(1, true);
  for (const bool sync_last : {true, false}) {
    const auto accumulated = run(2, sync_last);
    double worst = 0;
    for (std::size_t i = 0; i < whole.size(); ++i)
      worst = std::max(worst, std::abs(whole[i] - accumulated[i]));
    INFO("sync_last " << sync_last << ": max |accumulated - whole| " << worst);
    REQUIRE(worst <= 1e-5);  // rounding of two half means against one mean
  }
  auto net = test::small_mlp(7);
  dist::DataParallel dp(dist::create_communicator("single"), net->parameters());
  const auto quiet = dp.no_sync();
  REQUIRE_FALSE(dp.syncing());
  REQUIRE_THROWS_WITH(dp.finish_gradients(),
                      Catch::Contains("finish_gradients() inside no_sync()"));
}
