// SPDX-License-Identifier: Apache-2.0
// anvil_dist_bench: the distributed benchmarks, run under mpirun (one thread per rank).
//   allreduce: all-reduce (sum, f32) time over message sizes 4 B .. --max-bytes (x2 steps), with
//              algorithm and bus bandwidth as nccl-tests defines them (algbw = S / t,
//              busbw = algbw x 2 (n - 1) / n), t = the slowest rank's mean time per call.
//   steps:     the data-parallel training step (models::TrainingStep + dist::DataParallel) of the
//              given models at one per-rank batch, overlapped or not, with the time waiting for
//              the gradient all-reduce. On one rank the step is the plain (single-process) step.
// Writes one JSON document (rank 0) to --out; scripts/dist_report.py turns runs into the report.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "anvil_git_rev.h"
#include "anvil/anvil.h"
#include "engine/core/cuda_backend.h"
#include "engine/distributed/data_parallel.h"
#include "models/training_step.h"

using namespace anvil;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "?";
}

struct Args {
  std::string mode, out = "dist_bench.json", dist = "auto";
  std::int64_t max_bytes = 256ll << 20;
  std::vector<std::string> models;
  std::vector<std::int64_t> batches;  // per model, per rank
  int reps = 3, warmup = 1;
  double bucket_mb = 25.0;
  bool overlap = true;
};

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2) throw Error("usage: anvil_dist_bench allreduce|steps [--out F] [--dist B] ...");
  a.mode = argv[1];
  auto split = [](const std::string& s) {
    std::vector<std::string> v;
    std::size_t p = 0;
    while (p <= s.size()) {
      const std::size_t q = std::min(s.find(',', p), s.size());
      if (q > p) v.push_back(s.substr(p, q - p));
      p = q + 1;
    }
    return v;
  };
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    ANVIL_CHECK(k == "--no-overlap" || i + 1 < argc, "anvil_dist_bench", k, " needs a value");
    if (k == "--no-overlap") {
      a.overlap = false;
      continue;
    }
    const std::string v = argv[++i];
    if (k == "--out")
      a.out = v;
    else if (k == "--dist")
      a.dist = v;
    else if (k == "--max-bytes")
      a.max_bytes = std::stoll(v);
    else if (k == "--reps")
      a.reps = std::stoi(v);
    else if (k == "--warmup")
      a.warmup = std::stoi(v);
    else if (k == "--bucket-mb")
      a.bucket_mb = std::stod(v);
    else if (k == "--models")
      a.models = split(v);
    else if (k == "--batches")
      for (const auto& b : split(v)) a.batches.push_back(std::stoll(b));
    else
      throw Error("anvil_dist_bench: unknown option " + k);
  }
  ANVIL_CHECK(a.mode == "allreduce" || a.mode == "steps", "anvil_dist_bench", "unknown mode ",
              a.mode);
  ANVIL_CHECK(a.batches.empty() || a.batches.size() == a.models.size(), "anvil_dist_bench",
              "--batches needs one value per model");
  return a;
}

json run_allreduce(const Args& a, dist::Communicator& comm) {
  json rows = json::array();
  const bool gpu = comm.backend() == "nccl";
  const Device dev = gpu ? Device::cuda(0) : Device::cpu();
  const double n = comm.size();
  for (std::int64_t bytes = 4; bytes <= a.max_bytes; bytes *= 2) {
    const std::int64_t count = bytes / 4;
    Tensor t = Tensor::ones({count}, DType::f32, dev);
    // About 0.2 s of calls at 2 GB/s, between 5 and 200.
    const int iters =
        static_cast<int>(std::clamp<std::int64_t>(400000000 / (bytes + 100000), 5, 200));
    auto sync = [&] {
      if (gpu) require_cuda("anvil_dist_bench").synchronize(0);
    };
    for (int w = 0; w < 2; ++w) comm.all_reduce(t, dist::ReduceOp::sum);
    sync();
    comm.barrier();
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) comm.all_reduce(t, dist::ReduceOp::sum);
    sync();
    const double mine = seconds_since(t0) / iters;
    const double t_s = comm.all_reduce_scalar(mine, dist::ReduceOp::max);
    const double algbw = static_cast<double>(bytes) / t_s / 1e9;
    rows.push_back({{"bytes", bytes},
                    {"count", count},
                    {"iters", iters},
                    {"time_us", t_s * 1e6},
                    {"algbw_GBps", algbw},
                    {"busbw_GBps", algbw * 2.0 * (n - 1) / n}});
    if (comm.rank() == 0) {
      std::printf("allreduce %10lld B  %10.1f us  algbw %7.3f GB/s  busbw %7.3f GB/s\n",
                  static_cast<long long>(bytes), t_s * 1e6, algbw, algbw * 2.0 * (n - 1) / n);
      std::fflush(stdout);
    }
  }
  return rows;
}

json run_steps(const Args& a, const dist::CommunicatorPtr& comm) {
  json rows = json::array();
  const bool multi = comm->size() > 1;
  for (std::size_t m = 0; m < a.models.size(); ++m) {
    const std::string& name = a.models[m];
    const std::int64_t batch = a.batches.empty() ? models::info(name).cpu_batch : a.batches[m];
    // One rank: the plain step with the timing method's folded SGD where it applies; several:
    // data parallelism, which turns folding off (and logs why).
    models::TrainingStep step(name, batch, 1 + comm->rank(), /*fold_sgd=*/!multi);
    std::unique_ptr<dist::DataParallel> dp;
    std::vector<std::string> notes;
    if (multi) {
      dp = std::make_unique<dist::DataParallel>(
          comm, step.net().parameters(),
          dist::DataParallelOptions{.bucket_cap_mb = a.bucket_mb, .overlap = a.overlap});
      dp->broadcast_from_root(step.net().parameters());
      dp->prepare_optimizer(step.optimizer());
      notes = dp->notes();
    }
    std::vector<double> step_s, wait_s, fwd_s, bwd_s;
    for (int r = 0; r < a.warmup + a.reps; ++r) {
      comm->barrier();
      const auto t0 = Clock::now();
      step.forward_loss();
      const double f = seconds_since(t0);
      step.backward();
      const double b = seconds_since(t0) - f;
      if (dp) dp->finish_gradients();
      step.update();
      const double total = seconds_since(t0);
      if (r < a.warmup) continue;
      step_s.push_back(comm->all_reduce_scalar(total, dist::ReduceOp::max));
      wait_s.push_back(
          comm->all_reduce_scalar(dp ? dp->last_wait_seconds() : 0.0, dist::ReduceOp::average));
      fwd_s.push_back(comm->all_reduce_scalar(f, dist::ReduceOp::average));
      bwd_s.push_back(comm->all_reduce_scalar(b, dist::ReduceOp::average));
    }
    std::int64_t grad_bytes = 0;
    for (const Tensor& p : step.net().parameters())
      grad_bytes += static_cast<std::int64_t>(p.nbytes());
    json row = {{"model", name},
                {"ranks", comm->size()},
                {"rank_batch", batch},
                {"global_batch", batch * comm->size()},
                {"overlap", multi ? a.overlap : false},
                {"bucket_mb", a.bucket_mb},
                {"buckets", dp ? static_cast<std::int64_t>(dp->num_buckets()) : 0},
                {"grad_bytes", grad_bytes},
                {"reps", a.reps},
                {"step_s", median(step_s)},
                {"step_s_all", step_s},
                {"wait_s", median(wait_s)},
                {"forward_s", median(fwd_s)},
                {"backward_s", median(bwd_s)},
                {"notes", notes}};
    if (comm->rank() == 0) {
      std::printf(
          "step %-9s ranks %d batch/rank %4lld overlap %d: %.4f s (wait %.4f s, backward %.4f s)\n",
          name.c_str(), comm->size(), static_cast<long long>(batch), multi && a.overlap ? 1 : 0,
          median(step_s), median(wait_s), median(bwd_s));
      std::fflush(stdout);
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    auto comm = dist::create_communicator(a.dist);
    json ctx = {{"tool", "anvil_dist_bench"},
                {"mode", a.mode},
                {"backend", comm->backend()},
                {"backend_version", comm->version()},
                {"ranks", comm->size()},
                {"threads_per_rank", get_num_threads()},
                {"cpu", cpu_model()},
                {"git", ANVIL_GIT_REV},
                {"command", [&] {
                   std::string s;
                   for (int i = 0; i < argc; ++i) s += std::string(i ? " " : "") + argv[i];
                   return s;
                 }()}};
    json doc = {{"context", ctx}};
    if (a.mode == "allreduce")
      doc["allreduce"] = run_allreduce(a, *comm);
    else
      doc["steps"] = run_steps(a, comm);
    if (comm->rank() == 0) {
      std::ofstream f(a.out);
      f << doc.dump(2) << "\n";
      ANVIL_CHECK(f.good(), "anvil_dist_bench", "cannot write ", a.out);
    }
    comm->barrier();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "anvil_dist_bench: error: %s\n", e.what());
    return 1;
  }
}
