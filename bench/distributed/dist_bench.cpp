// SPDX-License-Identifier: Apache-2.0
// anvil_dist_bench: the distributed benchmarks, run under mpirun (one thread per rank).
//   allreduce: all-reduce (sum, f32) time over message sizes --min-bytes (4 B) .. --max-bytes
//              (x2 steps), t = the slowest rank's mean time per call, algorithm bandwidth
//              algbw = S / t, bus bandwidth busbw = algbw x 2 (n - 1) / n as nccl-tests, and
//              busbw_algorithm = algbw x the factor of the algorithm that ran (busbw_factor,
//              Note [Bus-bandwidth factor]); each size's result is verified
//              first (as nccl-tests' -c): rank-dependent values, the sum within 1 ulp per rank.
//   steps:     the data-parallel training step (models::TrainingStep + dist::DataParallel) of the
//              given models at one per-rank batch, overlapped or not, with the time waiting for
//              the gradient all-reduce, and each bucket's size and ready time (Note [Bucket
//              ready times]). On one rank the step is the plain (single-process) step.
//   overlap:   on 2+ ranks, the same step with the bucket all-reduces overlapped with backward and
//              after backward, alternating in pairs (ABBA order) in one process, so that the load
//              of a shared machine hits both alike; per pair, the share of the after-backward
//              wait that the overlap removes from the wait and from the step time.
//   triad:     the memory bandwidth every rank shares (Note [Triad ceiling]).
// --grad-bucket-dtype bf16: bf16 gradient buckets (steps, overlap) or a bf16 all-reduce
// (allreduce); --baseline uncoupled|unfolded: the steps' baselines (Note [Baselines]).
// Writes one JSON document (rank 0) to --out; scripts/dist_report.py turns runs into the report.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "anvil/anvil.h"
#include "engine/core/cuda_backend.h"
#include "engine/autograd/hooks.h"
#include "engine/core/provenance.h"
#include "engine/distributed/data_parallel.h"
#include "models/training_step.h"

using namespace anvil;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Note [Bus-bandwidth factor]
// nccl-tests' bus bandwidth multiplies algbw by 2 (n - 1) / n: what each rank of a ring (or of
// reduce-scatter + all-gather) sends and receives per byte of the tensor, so that busbw compares
// with a link's speed. It holds for ring and chunked (Open MPI's coll/tuned picks ring or
// Rabenseifner for large blocking all-reduces; both move 2 (n - 1) / n; for small ones it picks
// recursive doubling, for which the factor flatters it, as nccl-tests' does for NCCL's trees).
// libnbc runs a binomial tree: a reduce up and a broadcast down, ceil(log2 n) full-size messages
// each way on the critical path, so its factor is 2 ceil(log2 n) (2 at 2 ranks, where the ring's
// is 1): the rate at which its serial transfers ran, comparable with the same link speed.
struct BusFactor {
  double factor;
  std::string label;
};
BusFactor bus_factor(const std::string& algorithm, int n) {
  if (n < 2) return {0.0, "one rank: no traffic"};
  if (algorithm.rfind("libnbc", 0) == 0) {
    int rounds = 0;
    while ((1 << rounds) < n) ++rounds;
    return {2.0 * rounds, "2 ceil(log2 n): binomial reduce + broadcast, full size each hop"};
  }
  return {2.0 * (n - 1) / n, "2 (n - 1) / n: ring or reduce-scatter + all-gather"};
}

// Fills a tensor of `dtype` (host or device) with rank-dependent values, all-reduces it and
// counts the elements off: f32 further than 1 ulp per rank from the sum of every rank's values
// taken in rank order; bf16 (the wire format of bf16 gradient buckets) small integers, whose
// sums bf16 holds exactly, not equal to them bit for bit.
std::int64_t verify_all_reduce(dist::Communicator& comm, std::int64_t count, const Device& dev,
                               DType dtype) {
  const bool bf16 = dtype == DType::bf16;
  const auto value = [bf16](int rank, std::int64_t i) {
    return bf16 ? static_cast<float>(rank + 1 + i % 7)
                : static_cast<float>((rank + 1) * 0.731 + static_cast<double>(i % 1009) * 1e-3);
  };
  Tensor host = Tensor::empty({count}, dtype);
  for (std::int64_t i = 0; i < count; ++i) {
    if (bf16)
      host.data<BFloat16>()[i] = BFloat16(value(comm.rank(), i));
    else
      host.data<float>()[i] = value(comm.rank(), i);
  }
  Tensor t = dev.is_cpu() ? host : host.to(dev);
  comm.all_reduce(t, dist::ReduceOp::sum);
  const Tensor got = dev.is_cpu() ? t : t.to(Device::cpu());
  std::int64_t off = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < comm.size(); ++r) want += value(r, i);
    const float ulp = std::nextafter(std::fabs(want), INFINITY) - std::fabs(want);
    const float tolerance = bf16 ? 0.0F : ulp * static_cast<float>(comm.size());
    const float g = bf16 ? got.data<BFloat16>()[i].to_float() : got.data<float>()[i];
    if (!(std::fabs(g - want) <= tolerance)) ++off;
  }
  return off;
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

// Note [Bucket ready times]
// The bucket-order simulator (scripts/dist_sim.py) needs each gradient bucket's size and the time
// backward made it ready. The steps mode records both here, without touching DataParallel: a
// timing hook, registered after DataParallel's own (hooks run in registration order, Note
// [Post-accumulate hooks]), notes when each parameter's gradient is final, and a bucket is ready
// when its last parameter is. Buckets hold consecutive parameters in reverse registration order
// (Note [Gradient buckets]), so the parameter-to-bucket map follows from bucket_bytes() (exact
// for plain data parallelism, which this mode runs; a padded bucket would fail the check). Times
// are seconds from the start of backward in the last repetition, the maximum over ranks (a
// collective can start only once every rank has its bucket). They include DataParallel's copy of
// the gradient into its bucket, and DataParallel's whole hook (its progress call too, which can
// run much of an earlier bucket's all-reduce). Beside them, DataParallel's own timeline (Note
// [Bucket timeline] in data_parallel.h), on the same origin, the maximum over ranks:
// bucket_complete_s (its last gradient copied in, before the launch), bucket_start_s (its
// collective started: buckets start in order, so after every earlier bucket's completion) and
// bucket_done_s (first seen complete by a hook's poll or the final wait: an upper bound). The
// timeline's polls are extra MPI calls, so these runs drive progress slightly more often.
class BucketReadyClock {
 public:
  BucketReadyClock(const dist::DataParallel& dp, std::vector<Tensor> params)
      : params_(std::move(params)),
        bucket_of_(params_.size(), 0),
        ids_(params_.size(), 0),
        ready_(dp.num_buckets(), 0.0) {
    std::size_t b = 0;
    std::int64_t filled = 0;
    for (std::size_t k = params_.size(); k-- > 0;) {
      ANVIL_CHECK(b < dp.num_buckets(), "anvil_dist_bench", "parameter ", k, " falls outside the ",
                  dp.num_buckets(), " buckets");
      bucket_of_[k] = b;
      filled += params_[k].numel();  // elements: a bf16 bucket's bytes are half its f32 gradient's
      ANVIL_CHECK(filled <= dp.bucket_elements(b), "anvil_dist_bench", "bucket ", b, " holds ",
                  dp.bucket_elements(b), " elements, but its parameters add up to at least ",
                  filled);
      if (filled == dp.bucket_elements(b)) {
        ++b;
        filled = 0;
      }
    }
    for (std::size_t k = 0; k < params_.size(); ++k)
      ids_[k] = register_post_accumulate_grad_hook(params_[k], [this, k](const Tensor&) {
        double& t = ready_[bucket_of_[k]];
        t = std::max(t, seconds_since(t0_));
      });
  }
  ~BucketReadyClock() {
    for (std::size_t k = 0; k < params_.size(); ++k)
      remove_post_accumulate_grad_hook(params_[k], ids_[k]);
  }
  BucketReadyClock(const BucketReadyClock&) = delete;
  BucketReadyClock& operator=(const BucketReadyClock&) = delete;

  // Call right before backward.
  void start() {
    std::fill(ready_.begin(), ready_.end(), 0.0);
    t0_ = Clock::now();
  }
  const std::vector<double>& ready_s() const { return ready_; }
  double since_start(Clock::time_point t) const {
    return std::chrono::duration<double>(t - t0_).count();
  }

 private:
  std::vector<Tensor> params_;
  std::vector<std::size_t> bucket_of_;  // per parameter
  std::vector<std::uint64_t> ids_;      // hook ids, per parameter
  std::vector<double> ready_;           // per bucket, seconds since start()
  Clock::time_point t0_ = Clock::now();
};

struct Args {
  std::string mode, out = "dist_bench.json", dist = "auto";
  std::string grad_bucket_dtype = "f32";  // steps, overlap: DataParallel's; allreduce: the tensor's
  std::string baseline = "none";          // steps: none | uncoupled | unfolded (Note [Baselines])
  int threads = 1;                        // triad: threads per rank
  std::int64_t triad_mib = 64;            // triad: MiB per array
  std::int64_t min_bytes = 4, max_bytes = 256ll << 20;
  std::vector<std::string> models;
  std::vector<std::int64_t> batches;  // per model, per rank
  int reps = 3, warmup = 1;
  double bucket_mb = 25.0;
  bool overlap = true;
};

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2)
    throw Error("usage: anvil_dist_bench allreduce|steps|overlap|triad [--out F] [--dist B] ...");
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
    else if (k == "--min-bytes")
      a.min_bytes = std::stoll(v);
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
    else if (k == "--grad-bucket-dtype")
      a.grad_bucket_dtype = v;
    else if (k == "--baseline")
      a.baseline = v;
    else if (k == "--threads")
      a.threads = std::stoi(v);
    else if (k == "--triad-mib")
      a.triad_mib = std::stoll(v);
    else
      throw Error("anvil_dist_bench: unknown option " + k);
  }
  ANVIL_CHECK(
      a.mode == "allreduce" || a.mode == "steps" || a.mode == "overlap" || a.mode == "triad",
      "anvil_dist_bench", "unknown mode ", a.mode);
  ANVIL_CHECK(a.grad_bucket_dtype == "f32" || a.grad_bucket_dtype == "bf16", "anvil_dist_bench",
              "--grad-bucket-dtype must be f32 or bf16, got '", a.grad_bucket_dtype, "'");
  ANVIL_CHECK(a.baseline == "none" || a.baseline == "uncoupled" || a.baseline == "unfolded",
              "anvil_dist_bench", "--baseline must be none, uncoupled or unfolded, got '",
              a.baseline, "'");
  ANVIL_CHECK(a.reps >= 1 && a.reps <= 100000, "anvil_dist_bench",
              "--reps must be in [1, 100000], got ", a.reps);
  ANVIL_CHECK(a.threads >= 1 && a.threads <= 1024, "anvil_dist_bench",
              "--threads must be in [1, 1024], got ", a.threads);
  ANVIL_CHECK(a.triad_mib >= 1 && a.triad_mib <= 65536, "anvil_dist_bench",
              "--triad-mib must be in [1, 65536], got ", a.triad_mib);
  ANVIL_CHECK(a.batches.empty() || a.batches.size() == a.models.size(), "anvil_dist_bench",
              "--batches needs one value per model");
  return a;
}

json run_allreduce(const Args& a, dist::Communicator& comm) {
  json rows = json::array();
  const bool gpu = comm.backend() == "nccl";
  const Device dev = gpu ? Device::cuda(comm.cuda_device()) : Device::cpu();
  ANVIL_CHECK(a.min_bytes >= 4 && a.min_bytes <= a.max_bytes, "anvil_dist_bench",
              "--min-bytes must be in [4, --max-bytes], got ", a.min_bytes);
  // bf16: the gradient buckets' wire format, summed by the f32-summing op (Note [bf16 gradient
  // buckets]); `bytes` are then the bf16 bytes moved, half those of the f32 gradient they carry.
  const bool bf16 = a.grad_bucket_dtype == "bf16";
  const DType dtype = bf16 ? DType::bf16 : DType::f32;
  const std::int64_t element = bf16 ? 2 : 4;
  for (std::int64_t bytes = a.min_bytes; bytes <= a.max_bytes; bytes *= 2) {
    const std::int64_t count = bytes / element;
    const std::string algorithm = comm.all_reduce_algorithm(bytes);
    const BusFactor bus = bus_factor(algorithm, comm.size());
    // Every rank's count, summed: a failed check on any rank fails the run.
    const double wrong = comm.all_reduce_scalar(
        static_cast<double>(verify_all_reduce(comm, count, dev, dtype)), dist::ReduceOp::sum);
    ANVIL_CHECK(wrong == 0, "anvil_dist_bench allreduce", algorithm, " at ", bytes, " B: ", wrong,
                " element(s) differ from the sum by more than 1 ulp per rank");
    Tensor t = Tensor::ones({count}, dtype, dev);
    // About 0.2 s of calls at 2 GB/s, between 5 and 200.
    const int iters =
        static_cast<int>(std::clamp<std::int64_t>(400000000 / (bytes + 100000), 5, 200));
    auto sync = [&] {
      if (gpu) require_cuda("anvil_dist_bench").synchronize(dev.index);
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
                    {"dtype", a.grad_bucket_dtype},
                    {"algorithm", algorithm},
                    {"verified", true},
                    {"busbw_factor", bus.factor},
                    {"busbw_factor_label", bus.label},
                    {"iters", iters},
                    {"time_us", t_s * 1e6},
                    {"algbw_GBps", algbw},
                    // nccl-tests' convention, whatever ran (the reports compare with it)
                    {"busbw_GBps", algbw * 2.0 * (comm.size() - 1) / comm.size()},
                    {"busbw_algorithm_GBps", algbw * bus.factor}});
    if (comm.rank() == 0) {
      std::printf("allreduce %10lld B  %10.1f us  algbw %7.3f GB/s  busbw %7.3f GB/s (x%.2f)  %s\n",
                  static_cast<long long>(bytes), t_s * 1e6, algbw, algbw * bus.factor, bus.factor,
                  algorithm.c_str());
      std::fflush(stdout);
    }
  }
  return rows;
}

// Note [Baselines]
// What a data-parallel step is compared with decides what its efficiency means (issue 36):
//  - the solo step (steps at 1 rank, --baseline none): the timing method's step, with SGD folded
//    into the weight-gradient GEMM where it applies (Note [Folded SGD]); data parallelism cannot
//    fold (the update waits for the average), so part of the gap is that;
//  - --baseline unfolded: the same step with a separate update pass, as the ranks run it; at 1
//    rank this isolates the folding;
//  - --baseline uncoupled: n processes under the same mpirun and binding, each training its own
//    replica (unfolded) with no all-reduce, only a barrier between repetitions: the step n ranks
//    would take if communication were free, so it separates the socket's shared memory bandwidth
//    and caches (contention) from the communication. Weak-scaling efficiency against it is
//    communication's share alone.
json run_steps(const Args& a, const dist::CommunicatorPtr& comm) {
  json rows = json::array();
  const bool multi = comm->size() > 1;
  for (std::size_t m = 0; m < a.models.size(); ++m) {
    const std::string& name = a.models[m];
    const std::int64_t batch = a.batches.empty() ? models::info(name).cpu_batch : a.batches[m];
    // One rank: the plain step with the timing method's folded SGD where it applies; several:
    // data parallelism, which turns folding off (and logs why); a baseline: no data
    // parallelism, SGD not folded (Note [Baselines]).
    const bool baseline = a.baseline != "none";
    const bool data_parallel = multi && !baseline;
    models::TrainingStep step(name, batch, 1 + comm->rank(), /*fold_sgd=*/!multi && !baseline);
    std::unique_ptr<dist::DataParallel> dp;
    std::unique_ptr<BucketReadyClock> ready_clock;
    std::vector<std::string> notes;
    if (data_parallel) {
      dp = std::make_unique<dist::DataParallel>(
          comm, step.net().parameters(),
          dist::DataParallelOptions{
              .bucket_cap_mb = a.bucket_mb,
              .overlap = a.overlap,
              .grad_bucket_dtype = a.grad_bucket_dtype == "bf16" ? DType::bf16 : DType::f32});
      dp->broadcast_from_root(step.net().parameters());
      dp->prepare_optimizer(step.optimizer());
      dp->set_timeline(true);
      notes = dp->notes();
      ready_clock = std::make_unique<BucketReadyClock>(*dp, step.net().parameters());
    }
    std::vector<double> step_s, wait_s, fwd_s, bwd_s;
    double last_backward_s = 0;
    for (int r = 0; r < a.warmup + a.reps; ++r) {
      comm->barrier();
      const auto t0 = Clock::now();
      step.forward_loss();
      const double f = seconds_since(t0);
      if (ready_clock) ready_clock->start();
      step.backward();
      const double b = seconds_since(t0) - f;
      last_backward_s = b;
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
    // The last repetition's bucket sizes and ready times, the slowest rank's (Note [Bucket ready
    // times]); empty on one rank.
    json bucket_bytes = json::array(), bucket_ready_s = json::array(),
         bucket_complete_s = json::array(), bucket_start_s = json::array(),
         bucket_done_s = json::array();
    for (std::size_t i = 0; dp && i < dp->num_buckets(); ++i) {
      bucket_bytes.push_back(dp->bucket_bytes(i));
      bucket_ready_s.push_back(
          comm->all_reduce_scalar(ready_clock->ready_s()[i], dist::ReduceOp::max));
      bucket_complete_s.push_back(comm->all_reduce_scalar(
          ready_clock->since_start(dp->bucket_complete(i)), dist::ReduceOp::max));
      bucket_start_s.push_back(comm->all_reduce_scalar(
          ready_clock->since_start(dp->bucket_started(i)), dist::ReduceOp::max));
      bucket_done_s.push_back(comm->all_reduce_scalar(ready_clock->since_start(dp->bucket_done(i)),
                                                      dist::ReduceOp::max));
    }
    const double ready_backward_s = comm->all_reduce_scalar(last_backward_s, dist::ReduceOp::max);
    std::int64_t grad_bytes = 0;
    for (const Tensor& p : step.net().parameters())
      grad_bytes += static_cast<std::int64_t>(p.nbytes());
    json row = {{"model", name},
                {"ranks", comm->size()},
                {"rank_batch", batch},
                {"global_batch", batch * comm->size()},
                {"overlap", data_parallel ? a.overlap : false},
                {"baseline", a.baseline},
                {"grad_bucket_dtype", data_parallel ? a.grad_bucket_dtype : "none"},
                {"bucket_mb", a.bucket_mb},
                {"buckets", dp ? static_cast<std::int64_t>(dp->num_buckets()) : 0},
                {"grad_bytes", grad_bytes},
                {"reps", a.reps},
                {"step_s", median(step_s)},
                {"step_s_all", step_s},
                {"step_s_min", *std::min_element(step_s.begin(), step_s.end())},
                {"step_s_max", *std::max_element(step_s.begin(), step_s.end())},
                {"wait_s", median(wait_s)},
                {"forward_s", median(fwd_s)},
                {"backward_s", median(bwd_s)},
                {"bucket_bytes", bucket_bytes},
                {"bucket_ready_s", bucket_ready_s},
                {"bucket_ready_backward_s", ready_backward_s},
                {"bucket_complete_s", bucket_complete_s},
                {"bucket_start_s", bucket_start_s},
                {"bucket_done_s", bucket_done_s},
                {"notes", notes}};
    if (comm->rank() == 0) {
      const std::string label = baseline        ? "baseline " + a.baseline
                                : data_parallel ? a.grad_bucket_dtype + " buckets"
                                                : std::string("plain");
      std::printf(
          "step %-9s ranks %d batch/rank %4lld overlap %d %s: %.4f s [%.4f..%.4f] (wait %.4f s, "
          "backward %.4f s)\n",
          name.c_str(), comm->size(), static_cast<long long>(batch),
          data_parallel && a.overlap ? 1 : 0, label.c_str(), median(step_s),
          *std::min_element(step_s.begin(), step_s.end()),
          *std::max_element(step_s.begin(), step_s.end()), median(wait_s), median(bwd_s));
      std::fflush(stdout);
    }
    rows.push_back(row);
  }
  return rows;
}

// Note [Triad ceiling]
// A STREAM-like triad a[i] = b[i] + s c[i] over three arrays of --triad-mib MiB of doubles, on
// --threads threads per rank, every rank at once (one thread per rank, as the data-parallel
// ranks, is the case the all-reduce's ceiling needs): the memory bandwidth the ranks share.
// Bytes per pass 3 x array (two reads, one write; write-allocate traffic not counted, as
// STREAM), best of --reps passes after one warm-up; the total is the sum over ranks of each
// rank's best, and the slowest rank's pass time is recorded too.
json run_triad(const Args& a, dist::Communicator& comm) {
  const std::int64_t n = (a.triad_mib << 20) / static_cast<std::int64_t>(sizeof(double));
  std::vector<double> x(static_cast<std::size_t>(n)), y(x.size()), z(x.size());
  const int threads = a.threads;
  auto parallel = [&](auto body) {  // [begin, end) slices, one per thread
    std::vector<std::thread> pool;
    pool.reserve(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { body(n * t / threads, n * (t + 1) / threads); });
    for (auto& th : pool) th.join();
  };
  parallel([&](std::int64_t b, std::int64_t e) {  // first touch by the thread that uses it
    for (std::int64_t i = b; i < e; ++i) {
      x[static_cast<std::size_t>(i)] = 0.0;
      y[static_cast<std::size_t>(i)] = 1.0 + static_cast<double>(i % 13);
      z[static_cast<std::size_t>(i)] = 2.0;
    }
  });
  const double s = 0.5;
  double best = 1e30;
  for (int r = 0; r < 1 + a.reps; ++r) {
    comm.barrier();
    const auto t0 = Clock::now();
    parallel([&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i)
        x[static_cast<std::size_t>(i)] =
            y[static_cast<std::size_t>(i)] + s * z[static_cast<std::size_t>(i)];
    });
    const double t = seconds_since(t0);
    if (r > 0) best = std::min(best, t);
  }
  // The result is used (so the loop stays) and checked.
  const std::size_t probe = static_cast<std::size_t>(n / 2);
  ANVIL_CHECK(x[probe] == y[probe] + s * z[probe], "anvil_dist_bench triad", "wrong result");
  const double bytes = 3.0 * static_cast<double>(n) * sizeof(double);
  const double mine = bytes / best / 1e9;
  const double total = comm.all_reduce_scalar(mine, dist::ReduceOp::sum);
  const double slowest = comm.all_reduce_scalar(best, dist::ReduceOp::max);
  if (comm.rank() == 0) {
    std::printf("triad %d rank(s) x %d thread(s), 3 x %lld MiB: %.2f GB/s total (rank 0 %.2f)\n",
                comm.size(), threads, static_cast<long long>(a.triad_mib), total, mine);
    std::fflush(stdout);
  }
  return {{"ranks", comm.size()},     {"threads_per_rank", threads},
          {"array_mib", a.triad_mib}, {"bytes_per_pass", bytes},
          {"reps", a.reps},           {"best_s_slowest_rank", slowest},
          {"total_GBps", total},      {"rank0_GBps", mine}};
}

// Note [Paired overlap measurement]
// On a shared machine the load changes from minute to minute, so runs taken minutes apart cannot
// say how much step time the overlap saves. Here each repetition runs the step twice in one
// process, overlapped and after backward, in ABBA order (pair r starts with overlap when r is
// even), and the ratios are formed within each pair: wait_hidden = 1 - wait_ov / wait_after, and
// step_saved = (step_after - step_ov) / wait_after (1 = the whole after-backward wait was
// removed from the step, 0 = nothing; negative = the overlapped step was slower). The report
// gives the median and the range over the pairs. A rank's wait also contains the time its peer
// was still in backward (ranks drift apart under load, by more than the all-reduce takes here),
// which no overlap can hide; so the all-reduce's exposed time is also measured without it:
// exposed = (last rank's gradients averaged) - (last rank's backward end), on the monotonic clock
// the ranks of one machine share, and exposed_hidden = 1 - exposed_ov / exposed_after.
json run_overlap(const Args& a, const dist::CommunicatorPtr& comm) {
  ANVIL_CHECK(comm->size() > 1, "anvil_dist_bench overlap", "needs 2 or more ranks, got ",
              comm->size());
  json rows = json::array();
  for (std::size_t m = 0; m < a.models.size(); ++m) {
    const std::string& name = a.models[m];
    const std::int64_t batch = a.batches.empty() ? models::info(name).cpu_batch : a.batches[m];
    models::TrainingStep step(name, batch, 1 + comm->rank(), /*fold_sgd=*/false);
    dist::DataParallel dp(
        comm, step.net().parameters(),
        dist::DataParallelOptions{
            .bucket_cap_mb = a.bucket_mb,
            .grad_bucket_dtype = a.grad_bucket_dtype == "bf16" ? DType::bf16 : DType::f32});
    dp.broadcast_from_root(step.net().parameters());
    dp.prepare_optimizer(step.optimizer());
    struct Sample {
      double step = 0, wait = 0, backward = 0, exposed = 0;
    };
    // Seconds on the host's monotonic clock, which all ranks of this machine share.
    auto clock_s = [] {
      return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
    };
    auto one = [&](bool overlap) {
      dp.set_overlap(overlap);
      comm->barrier();
      const auto t0 = Clock::now();
      step.forward_loss();
      const double f = seconds_since(t0);
      step.backward();
      const double b = seconds_since(t0) - f;
      const double backward_end = clock_s();
      dp.finish_gradients();
      const double gradients_done = clock_s();
      step.update();
      const double total = seconds_since(t0);
      const double last_backward_end = comm->all_reduce_scalar(backward_end, dist::ReduceOp::max);
      const double last_done = comm->all_reduce_scalar(gradients_done, dist::ReduceOp::max);
      return Sample{comm->all_reduce_scalar(total, dist::ReduceOp::max),
                    comm->all_reduce_scalar(dp.last_wait_seconds(), dist::ReduceOp::average),
                    comm->all_reduce_scalar(b, dist::ReduceOp::average),
                    last_done - last_backward_end};
    };
    for (int w = 0; w < a.warmup; ++w) {
      one(true);
      one(false);
    }
    json pairs = json::array();
    std::vector<double> hidden, saved, step_ov, step_after, wait_ov, wait_after, exposed_hidden;
    for (int r = 0; r < a.reps; ++r) {
      Sample ov, after;
      if (r % 2 == 0) {
        ov = one(true);
        after = one(false);
      } else {
        after = one(false);
        ov = one(true);
      }
      const double h = after.wait > 0 ? 1.0 - ov.wait / after.wait : 0.0;
      const double s = after.wait > 0 ? (after.step - ov.step) / after.wait : 0.0;
      const double eh = after.exposed > 0 ? 1.0 - ov.exposed / after.exposed : 0.0;
      exposed_hidden.push_back(eh);
      hidden.push_back(h);
      saved.push_back(s);
      step_ov.push_back(ov.step);
      step_after.push_back(after.step);
      wait_ov.push_back(ov.wait);
      wait_after.push_back(after.wait);
      pairs.push_back({{"step_overlap_s", ov.step},
                       {"step_after_s", after.step},
                       {"wait_overlap_s", ov.wait},
                       {"wait_after_s", after.wait},
                       {"backward_overlap_s", ov.backward},
                       {"backward_after_s", after.backward},
                       {"exposed_overlap_s", ov.exposed},
                       {"exposed_after_s", after.exposed},
                       {"exposed_hidden", eh},
                       {"wait_hidden", h},
                       {"step_saved", s}});
    }
    json row = {{"model", name},
                {"ranks", comm->size()},
                {"rank_batch", batch},
                {"bucket_mb", a.bucket_mb},
                {"buckets", static_cast<std::int64_t>(dp.num_buckets())},
                {"reps", a.reps},
                {"pairs", pairs},
                {"step_overlap_s", median(step_ov)},
                {"step_after_s", median(step_after)},
                {"wait_overlap_s", median(wait_ov)},
                {"wait_after_s", median(wait_after)},
                {"wait_hidden", median(hidden)},
                {"exposed_hidden", median(exposed_hidden)},
                {"step_saved", median(saved)}};
    if (comm->rank() == 0) {
      std::printf(
          "overlap %-9s batch/rank %4lld: step %.4f vs %.4f s, wait %.4f vs %.4f s, wait hidden "
          "%.0f %% (%.0f..%.0f), exposed all-reduce hidden %.0f %% (%.0f..%.0f), step saved %.0f "
          "%% of the wait (%.0f..%.0f)\n",
          name.c_str(), static_cast<long long>(batch), median(step_ov), median(step_after),
          median(wait_ov), median(wait_after), 100 * median(hidden),
          100 * *std::min_element(hidden.begin(), hidden.end()),
          100 * *std::max_element(hidden.begin(), hidden.end()), 100 * median(exposed_hidden),
          100 * *std::min_element(exposed_hidden.begin(), exposed_hidden.end()),
          100 * *std::max_element(exposed_hidden.begin(), exposed_hidden.end()),
          100 * median(saved), 100 * *std::min_element(saved.begin(), saved.end()),
          100 * *std::max_element(saved.begin(), saved.end()));
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
                {"mpi_progress",
                 [] {
                   const char* v = std::getenv("ANVIL_MPI_PROGRESS");
                   return std::string(v != nullptr && v[0] != '\0' ? v : "hooks");
                 }()},
                {"loadavg_start",
                 [] {
                   std::ifstream f("/proc/loadavg");
                   std::string l;
                   std::getline(f, l);
                   return l;
                 }()},
                {"git", anvil_git_revision()},
                {"command", [&] {
                   std::string s;
                   for (int i = 0; i < argc; ++i) s += std::string(i ? " " : "") + argv[i];
                   return s;
                 }()}};
    json prov = json::object();  // Note [Provenance]
    for (const auto& [key, value] : provenance()) prov[key] = value;
    json doc = {{"provenance", prov}, {"context", ctx}};
    if (a.mode == "allreduce")
      doc["allreduce"] = run_allreduce(a, *comm);
    else if (a.mode == "overlap")
      doc["overlap"] = run_overlap(a, comm);
    else if (a.mode == "triad")
      doc["triad"] = run_triad(a, *comm);
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
