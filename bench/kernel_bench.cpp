// SPDX-License-Identifier: Apache-2.0
// The kernel/ family: every variant of every table (but gemm, whose gemm/ family also sweeps the
// transpose modes) on the problems of the --anvil_models networks, through the op drivers
// (harness/op_driver.h):
//   kernel/<op>/<variant>/<pass>/<model>:<layer>/batch:<b>/device:cpu/threads:<t>
//   kernel/<op>/<variant>/<pass>/<model>:<layer>/batch:<b>/device:cuda
//   kernel/<op>/<variant>/<pass>/problem:<descriptor>/device:...   (--anvil_problem)
//   kernel/<op>/<variant>/<pass>/<group>:<descriptor>/device:...   (--anvil_kernel_groups=on)
//
// Note [Kernel benchmarks]
// * Problems. On the CPU (--anvil_kernels=on): each --anvil_models model's problems at its
//   paper CPU batch (harness::model_problems, deduplicated per model; the first layer names the
//   problem and the context entry anvil.kernel.<model>:<layer> holds its descriptor). On the GPU
//   (whenever one is usable, as the GPU GEMM rows): the conv, pooling and batch-norm layers of
//   AlexNet, ResNet-50 and VGG16 at their smallest GPU batch and the LSTM layers of LSTM-32/64
//   at every GPU batch (PTB and IMDB at their first). --anvil_kernel_groups=on adds every
//   driver's groups on both devices: the small shapes of the driver tests, and so far the only
//   rows of the tables no model layer lists (pointwise, reductions, softmax, embedding, dropout,
//   the optimizers, avg_pool2d). --anvil_problem replaces all of these. Every pass of a problem
//   (OpDriver::passes) is a row; a problem from the command line runs its own pass only.
// * Variants: `default` (what the table selects unforced; the label names it) and every variant
//   of the row's device but ref, less --anvil_skip_variant. A variant that declines the problem
//   is SkipWithError with the table's reason, never left out.
// * Validate, then time. The warm-up call's outputs are checked against ref by the driver
//   (OpCase::check_sampled(48), Note [Sampled checks]: 48 entries for conv2d, all of them for the
//   others); a mismatch is SkipWithError naming the entry and both values. --anvil_mode=perf
//   skips the check, --anvil_mode=check times one call.
// * Timing. CPU: the host clock over the loop, real time, MinTime --anvil_kernel_min_time.
//   GPU: manual time, MinTime kGpuMinTime: CUDA events around each call on the device's stream,
//   after a write of kScrubBytes that evicts the L2 cache, so that every call starts cold, as a
//   layer of a training step does (Note [Cold L2]). A table that updates its inputs in place (its
//   no-autotune reason says so) gets them back from prepare() every 32 calls, outside the timed
//   part.
// * Counters: FLOP/s and bytes/s from the driver's counts; on the CPU pct_peak against the
//   measured FMA peak and pct_bandwidth against the measured STREAM triad of the row's thread
//   count (GPU rows: no measured ceiling yet).
// The rows of one (problem, pass, device) are registered next to each other, so that they share
// one case (its inputs and ref), made on first use.
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "bench/bench_support.h"
#include "bench/gpu_gemm_bench.h"
#include "bench/registrations.h"
#include "engine/core/cuda_backend.h"
#include "harness/op_driver.h"
#include "kernels/cpu/peak/machine_peak.h"
#include "kernels/cudnn_conv_plan.h"
#include "harness/problem_descriptor.h"
#include "models/registry.h"

namespace anvil::bench {
namespace {

// Note [Cold L2]
// A layer of a training step finds in the GPU's L2 what the previous layer left there, not its
// own inputs; timing a kernel back to back on the same buffers lets it hit L2 from the second
// call on and overstates a small layer's speed. Before each timed call the family writes a
// buffer larger than any current L2 (H100 50 MiB, H200 60 MiB; 256 MiB leaves room), outside the
// events.
constexpr std::int64_t kScrubBytes = std::int64_t{256} << 20;
// In-place tables: calls between two prepare()s (0.37^32 keeps grad_scale's values normal).
constexpr std::int64_t kRefreshEvery = 32;
constexpr int kSampledEntries = 48;
// GPU rows: MinTime in GPU seconds. A layer takes microseconds to milliseconds, so 0.05 s is tens
// to thousands of calls, and the ~1,500 GPU rows fit a device session.
constexpr double kGpuMinTime = 0.05;

// One (problem, pass) on one device: the rows of its variants (and thread counts).
struct Target {
  const harness::OpDriver* driver = nullptr;
  std::string source;  // "<model>:<layer>/batch:<b>" or "problem:<descriptor>"
  OpProblem problem;   // this pass, on this device
};

std::string key_of(const OpProblem& p) {
  return std::visit([](const auto& q) { return q.key() + " " + q.device.str(); }, p);
}
bool on_gpu(const OpProblem& p) {
  return std::visit([](const auto& q) { return q.device.is_cuda(); }, p);
}

// The case of the rows running now; a new target frees the previous one's buffers first.
harness::OpCase& case_for(const Target& t) {
  static std::string id;
  static std::unique_ptr<harness::OpCase> current;
  const std::string want = key_of(t.problem);
  if (current == nullptr || id != want) {
    current.reset();
    current = t.driver->make_case(t.problem, 1);
    id = want;
  }
  return *current;
}

// The STREAM-triad bandwidth of `threads` threads (bytes/s), measured once per thread count on
// first use: the ceiling of the memory-bound rows' pct_bandwidth, as the FMA peak is pct_peak's.
double triad_bandwidth(int threads) {
  static std::map<int, double> measured;
  auto it = measured.find(threads);
  if (it == measured.end())
    it = measured.emplace(threads, measure_triad_bandwidth(threads, std::int64_t{16} << 20, 5))
             .first;
  return it->second;
}

void timed_cpu(benchmark::State& state, harness::OpCase& c, const std::string& variant,
               bool refresh, double flops, double bytes, int threads) {
  using Clock = std::chrono::steady_clock;
  double paused = 0;
  std::int64_t calls = 0;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    if (refresh && ++calls % kRefreshEvery == 0) {
      state.PauseTiming();
      const auto p0 = Clock::now();
      c.prepare(variant);
      paused += std::chrono::duration<double>(Clock::now() - p0).count();
      state.ResumeTiming();
    }
    c.run();
    benchmark::ClobberMemory();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count() - paused;
  if (flops > 0) {
    state.counters["FLOP/s"] =
        benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
    set_pct_peak(state, flops, seconds, threads);
  }
  if (bytes > 0) {
    state.SetBytesProcessed(
        static_cast<std::int64_t>(bytes * static_cast<double>(state.iterations())));
    if (seconds > 0)
      state.counters["pct_bandwidth"] = bytes * static_cast<double>(state.iterations()) / seconds /
                                        triad_bandwidth(threads) * 100.0;
  }
}

void timed_gpu(benchmark::State& state, harness::OpCase& c, const std::string& variant,
               bool refresh, double flops, double bytes) {
  const Device dev = gpu_bench_device();
  CudaBackend& cuda = *cuda_backend();
  static Tensor scrub;  // Note [Cold L2]
  if (!scrub.defined()) scrub = Tensor::empty({kScrubBytes / 4}, DType::f32, dev);
  std::int64_t calls = 0;
  for (auto _ : state) {
    if (refresh && ++calls % kRefreshEvery == 0) c.prepare(variant);
    scrub.fill_(static_cast<double>(calls % 7));
    state.SetIterationTime(cuda.time_on_stream(dev.index, [&] { c.run(); }));
  }
  if (flops > 0)
    state.counters["FLOP/s"] =
        benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  if (bytes > 0)
    state.SetBytesProcessed(
        static_cast<std::int64_t>(bytes * static_cast<double>(state.iterations())));
}

// The row's label: the variant, and for cuDNN's own choice the algorithm its search picked
// ("cuda.cudnn[CUDNN_CONVOLUTION_FWD_ALGO_FFT]", which the GPU conv table reports).
std::string label_of(const std::string& variant, const OpProblem& p) {
  const auto* conv = std::get_if<ConvProblem>(&p);
  if (conv == nullptr || variant != kernels::kCudnnDefaultVariant) return variant;
  ConvProblem plain = *conv;
  plain.fuse_relu = false;
  return kernels::cudnn_default_label(plain);
}

void run_row(benchmark::State& state, const Target& t, const std::string& variant, int threads) {
  try {
    if (threads > 0) set_num_threads(threads);
    const harness::OpDriver& d = *t.driver;
    const std::string name = variant == "default" ? d.select(t.problem) : variant;
    harness::OpCase& c = case_for(t);
    c.prepare(name);  // throws with the table's reason when `name` declines the problem
    c.run();          // warm-up (plans, primitives, page faults) and the call validated
    state.SetLabel(label_of(name, t.problem));
    if (validating()) {
      const std::string bad = c.check_sampled(kSampledEntries);
      if (!bad.empty()) {
        state.SkipWithError(("validation against ref failed: " + bad).c_str());
        return;
      }
    }
    const bool refresh = !d.table().no_autotune_reason().empty();
    const double flops = d.flops(t.problem), bytes = d.bytes(t.problem);
    if (on_gpu(t.problem))
      timed_gpu(state, c, name, refresh, flops, bytes);
    else
      timed_cpu(state, c, name, refresh, flops, bytes, threads);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// "default" and every variant of `device` but ref, less --anvil_skip_variant.
std::vector<std::string> variants_on(const harness::OpDriver& d, DeviceType device) {
  std::vector<std::string> out{"default"};
  for (const auto& v : d.table().list())
    if (v.device == device && v.name != "ref" && !skipped(d.op(), v.name)) out.push_back(v.name);
  return out;
}

void register_target(const Target& t) {
  const bool gpu = on_gpu(t.problem);
  const std::string stem = detail::str_cat("kernel/", t.driver->op(), "/");
  const std::string tail = detail::str_cat("/", harness::pass_label(t.problem), "/", t.source,
                                           gpu ? "/device:cuda" : "/device:cpu");
  for (const auto& variant : variants_on(*t.driver, gpu ? DeviceType::cuda : DeviceType::cpu)) {
    if (gpu) {
      auto* b =
          benchmark::RegisterBenchmark(detail::str_cat(stem, variant, tail).c_str(),
                                       [=](benchmark::State& st) { run_row(st, t, variant, 0); })
              ->UseManualTime()
              ->Unit(benchmark::kMillisecond);
      if (options().mode == "check")
        b->Iterations(1);
      else
        b->MinTime(kGpuMinTime);
      continue;
    }
    for (int threads : options().threads)
      register_row(
          detail::str_cat(stem, variant, tail, "/threads:", threads),
          [=](benchmark::State& st) { run_row(st, t, variant, threads); },
          options().kernel_min_time);
  }
}

// One target per pass of `p` (or p's own pass), on `device`.
void add_passes(std::vector<Target>& out, const harness::OpDriver& d, const std::string& source,
                const OpProblem& p, const Device& device, bool only_its_pass) {
  const std::vector<OpProblem> passes = only_its_pass ? std::vector<OpProblem>{p} : d.passes(p);
  for (const auto& q : passes) out.push_back({&d, source, harness::on_device(q, device)});
}

// The problems of `model` at `batch` for every driver but gemm's, named <model>:<layer>/batch:<b>.
void add_model(std::vector<Target>& out, const std::string& model, std::int64_t batch,
               const Device& device, const std::set<std::string>& ops) {
  const std::string prefix = model + ":";
  for (const harness::OpDriver* d : harness::drivers()) {
    if (d->op() == "gemm" || (!ops.empty() && ops.count(d->op()) == 0)) continue;
    for (const auto& np : harness::model_problems(*d, model, batch)) {
      const std::string layer =
          np.name.rfind(prefix, 0) == 0 ? np.name.substr(prefix.size()) : np.name;
      const std::string source = detail::str_cat(model, ":", layer, "/batch:", batch);
      if (device.is_cpu())
        benchmark::AddCustomContext(detail::str_cat("anvil.kernel.", model, ":", layer),
                                    harness::descriptor(np.problem));
      add_passes(out, *d, source, np.problem, device, false);
    }
  }
}

// With --anvil_kernel_groups=on, every driver's groups (gemm's: the gemm/ family), each problem
// named <group>:<descriptor>; the context entry anvil.kernel_minimum.<op>.<group>.<device> holds
// the driver's minimum_problems, which tests/bench/test_bench_suite.py checks the rows against.
void add_groups(std::vector<Target>& out, const Device& device) {
  if (!options().kernel_groups) return;
  for (const harness::OpDriver* d : harness::drivers()) {
    if (d->op() == "gemm") continue;
    for (const auto& group : d->groups()) {
      benchmark::AddCustomContext(detail::str_cat("anvil.kernel_minimum.", d->op(), ".", group, ".",
                                                  device.is_cpu() ? "cpu" : "cuda"),
                                  std::to_string(d->minimum_problems(group, device.type)));
      for (const auto& np : d->group(group))
        add_passes(out, *d, detail::str_cat(group, ":", harness::descriptor(np.problem)),
                   np.problem, device, false);
    }
  }
}

// The rows of --anvil_problem on `device`: each problem's own pass.
void add_problems(std::vector<Target>& out, const Device& device) {
  for (const auto& np : options().problems) {
    const harness::OpDriver* d = harness::find_driver(op_name(np.problem));
    if (d == nullptr || d->op() == "gemm") continue;  // the gemm/ family's
    add_passes(out, *d, "problem:" + harness::descriptor(np.problem), np.problem, device, true);
  }
}

// CPU rows (with --anvil_kernels=on): the listed models' problems (and the groups).
void add_cpu(std::vector<Target>& out) {
  if (!options().problems.empty()) return add_problems(out, Device::cpu());
  std::set<std::string> seen;
  for (const auto& model : options().models) {
    if (!seen.insert(model).second) continue;
    benchmark::AddCustomContext("anvil.kernel_batch." + model,
                                std::to_string(models::info(model).cpu_batch));
    add_model(out, model, models::info(model).cpu_batch, Device::cpu(), {});
  }
  add_groups(out, Device::cpu());
}

// GPU rows (whenever a CUDA device is usable, as the GPU GEMM rows): the layers of the GPU
// study's networks (Note [Kernel benchmarks]) (and the groups).
void add_gpu(std::vector<Target>& out) {
  const Device dev = gpu_bench_device();
  if (!options().problems.empty()) return add_problems(out, dev);
  const std::set<std::string> spatial{"conv2d", "max_pool2d", "adaptive_avg_pool2d",
                                      "batch_norm2d"};
  for (const char* model : {"alexnet", "resnet50", "vgg16"}) {
    const auto& batches = models::info(model).gpu_batches;
    if (!batches.empty()) add_model(out, model, batches.front(), dev, spatial);
  }
  for (const char* model : {"lstm32", "lstm64", "ptb_small", "lstm_imdb"}) {
    const auto& batches = models::info(model).gpu_batches;
    const bool sweep = std::string(model) == "lstm32" || std::string(model) == "lstm64";
    for (std::size_t i = 0; i < batches.size() && (sweep || i == 0); ++i)
      add_model(out, model, batches[i], dev, {"lstm"});
  }
  add_groups(out, dev);
}

}  // namespace

void register_kernel_benchmarks() {
  std::vector<Target> targets;
  if (options().kernels) add_cpu(targets);
  if (gpu_benchmarks_enabled()) add_gpu(targets);
  for (const Target& t : targets) register_target(t);
}

}  // namespace anvil::bench
