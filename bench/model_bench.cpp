// SPDX-License-Identifier: Apache-2.0
// model/<name>/<phase>/batch:<b>/threads:<t>[/precision:<p>]: the timing method's steps of
// networks.md for every --anvil_models model (models/training_step.h) on synthetic inputs, at each
// batch of batches_of() (the paper's CPU batch unless --anvil_batches / --anvil_batch_sweep say
// otherwise), once per --anvil_precision policy (the model built and every step run inside
// AutocastGuard{p}, Note [Autocast policy]; fp32 rows have no precision part):
//   train_step      forward + loss + backward + (clip) + SGD update, wall time per step
//                   (models with LSTM layers: also once per `lstm` variant, ".../lstm:<variant>");
//   inference_step  forward under NoGradGuard, eval mode;
//   forward, backward, update  one phase of the training step each (--anvil_phases=on): the
//                   whole step runs every iteration and only the named phase is timed (manual
//                   time), so the three add up to about one train_step; 5 iterations each.
// model/<name>/<phase>/batch:<b>/device:cuda/input:<definition>: the training and inference step
// of the models with a GPU path (ModelInfo::gpu_path) on cuda:0 over networks.md's GPU batch
// sweep, timed with CUDA events around the whole step (batch upload + forward + loss + backward
// + update + device synchronisation), registered after every CPU benchmark (Note [GPU model
// benchmarks]). <definition> is where the batch comes from (models::BatchSource): pinned (the
// default: page-locked, copied asynchronously one step ahead), resident (already on the GPU),
// pageable (copied from ordinary memory and waited for); --anvil_gpu_inputs picks them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench/bench_support.h"
#include "bench/gpu_gemm_bench.h"
#include "bench/registrations.h"
#include "anvil/anvil.h"
#include "engine/autograd/autocast.h"
#include "engine/core/cuda_backend.h"
#include "engine/dispatch/host_profile.h"
#include "engine/dispatch/lstm_problem.h"
#include "engine/dispatch/selection.h"
#include "models/training_step.h"

namespace anvil::bench {
namespace {

enum class Phase { train_step, inference_step, forward, backward, update };
const char* phase_name(Phase p) {
  switch (p) {
    case Phase::train_step:
      return "train_step";
    case Phase::inference_step:
      return "inference_step";
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::update:
      return "update";
  }
  return "?";
}

using Clock = std::chrono::steady_clock;
constexpr int kPhaseIterations = 5;
// Untimed steps before the timed ones (networks.md: at least one step excluded), as many as the
// peers' --warmup in scripts/bench.sh. Two because the first step is not yet steady for the
// second: it creates the optimizer state (momentum buffers) after the backward pass, so the
// second step's allocation pattern differs, and with the bounded block cache (Note [CPU cache
// bound]) VGG16's second step measured 8.2-8.9 s against 7.0-7.5 s for the third and later ones.
constexpr int kWarmupSteps = 2;
// Whole steps are then timed for at least this long; no MinWarmUpTime on top.
constexpr double kStepMinTime = 2.0;
// Note [Whole-step timing]
// A whole-step benchmark (train_step, inference_step) is registered with Iterations(1), and its
// one iteration runs whole steps until they add up to kStepMinTime; it reports their mean as the
// iteration's manual time and their number as the counter timed_steps. Why not MinTime: Google
// Benchmark calls the benchmark function afresh for each of its iteration-count probes (1, then
// up to 10x more, until MinTime is reached), and each call builds the model and runs the warm-up
// again. FCN-5's inference row built the model three times and ran 27 timed steps to report 16;
// the process took 14.6 s for 2.7 s of reported steps.
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Runs the training step with only `phase` timed; returns that phase's seconds.
double timed_phase(models::TrainingStep& s, Phase phase) {
  double timed = 0;
  auto run = [&](Phase p, auto&& fn) {
    const auto t0 = Clock::now();
    fn();
    if (p == phase) timed = seconds_since(t0);
  };
  run(Phase::forward, [&] { s.forward_loss(); });
  run(Phase::backward, [&] { s.backward(); });
  run(Phase::update, [&] { s.update(); });
  return timed;
}

// With ANVIL_VERBOSE=host_profile (Note [Host profile]): the host time of the timed steps per
// dispatched variant, on stderr per benchmark row, and its sum per step as host_variants_ms.
void report_host_profile(benchmark::State& state, const std::string& row, std::int64_t steps) {
  if (!host_profile_enabled() || steps <= 0) return;
  const std::vector<HostProfileRow> rows = host_profile_rows();
  double exclusive_s = 0;
  for (const HostProfileRow& r : rows) exclusive_s += r.exclusive_s;
  state.counters["host_variants_ms"] = 1e3 * exclusive_s / static_cast<double>(steps);
  const std::string text = host_profile_table(rows, static_cast<double>(steps));
  std::fprintf(stderr, "anvil host profile: %s, per step over %lld steps\n%s", row.c_str(),
               static_cast<long long>(steps), text.c_str());
}

// `forced_lstm`: run the model's LSTM layers on this variant ("" = the default selection).
void run_model(benchmark::State& state, const std::string& name, Phase phase, std::int64_t batch,
               int threads, const std::string& forced_lstm = {},
               Precision precision = Precision::fp32) {
  try {
    set_num_threads(threads);
    // Warm-up and timed steps under the policy; parameters and optimizer stay f32.
    const AutocastGuard autocast(precision);
    std::unique_ptr<ForceVariant> force;
    if (!forced_lstm.empty()) force = std::make_unique<ForceVariant>("lstm", forced_lstm);
    // Blocks cached by the previous benchmark's model would count in this one's resident peak.
    empty_cache();
    models::TrainingStep steps(name, batch, /*seed=*/1, options().fold_sgd);
    const bool whole = phase == Phase::train_step || phase == Phase::inference_step;
    auto step = [&] {
      if (phase == Phase::inference_step)
        steps.inference_step();
      else
        steps.train_step();
    };
    // Warm-up outside the timed region: page faults, primitive creation, optimizer state.
    for (int i = 0; i < kWarmupSteps; ++i) step();
    reset_peak_memory();
    const bool rss_reset = reset_peak_rss();
    host_profile_reset();
    double timed_seconds = 0;
    std::int64_t timed_steps = 0;
    std::vector<double> step_seconds;  // every timed whole step, for the median
    for (auto _ : state) {
      if (whole) {  // Note [Whole-step timing]
        double total = 0;
        std::int64_t n = 0;
        do {
          const auto t0 = Clock::now();
          step();
          step_seconds.push_back(seconds_since(t0));
          total += step_seconds.back();
          ++n;
        } while (total < kStepMinTime);
        state.SetIterationTime(total / static_cast<double>(n));
        timed_seconds += total / static_cast<double>(n);
        timed_steps += n;
      } else {
        const double s = timed_phase(steps, phase);
        state.SetIterationTime(s);
        timed_seconds += s;
        ++timed_steps;
      }
    }
    state.counters["timed_steps"] = static_cast<double>(timed_steps);
    report_host_profile(state,
                        detail::str_cat(name, " ", phase_name(phase), " batch ", batch, " threads ",
                                        threads, forced_lstm.empty() ? "" : " lstm " + forced_lstm),
                        whole ? timed_steps : 0);  // phase rows: the profile spans whole steps
    // networks.md asks for the mean and the median seconds per step: the manual time is the
    // mean; the median resists the steps a shared host stalls (a vCPU taken away for a second
    // nearly doubles a two-thread step).
    if (!step_seconds.empty()) state.counters["step_median_s"] = median(step_seconds);
    const double fwd = steps.forward_flops();
    // FLOPs of the timed work: backward ~ 2x forward; the update is not counted in FLOPs.
    const double flops = phase == Phase::train_step ? 3.0 * fwd
                         : phase == Phase::backward ? 2.0 * fwd
                         : phase == Phase::update   ? 0.0
                                                    : fwd;
    state.counters["samples/s"] = benchmark::Counter(static_cast<double>(batch),
                                                     benchmark::Counter::kIsIterationInvariantRate);
    if (flops > 0) {
      state.counters["FLOP/s"] =
          benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
      set_pct_peak(state, flops, timed_seconds, threads);
      // A bf16 step runs its GEMMs and convolutions on the bf16 dot units: pct_peak (FP32 FMA)
      // can pass 100 % there, so the row also reports its share of the bf16 peak.
      if (precision == Precision::bf16) set_pct_peak_bf16(state, flops, timed_seconds, threads);
    }
    // With the reset: the process's resident peak during the timed steps (the model, its
    // activations and gradients, plus the libraries' baseline); without: since process start.
    state.counters["peak_rss_MB"] = peak_rss_bytes() / 1048576.0;
    state.counters["alloc_peak_MB"] = static_cast<double>(memory_stats().peak) / 1048576.0;
    std::string label =
        steps.sgd_folded() && phase != Phase::inference_step ? "sgd folded into backward" : "";
    if (precision != Precision::fp32)
      label =
          detail::str_cat(label, label.empty() ? "" : "; ", "autocast ", precision_name(precision),
                          precision == Precision::fp16 ? " (no loss scaling)" : "");
    if (!rss_reset)
      label += std::string(label.empty() ? "" : "; ") + "peak_rss_MB is the process lifetime peak";
    if (!label.empty()) state.SetLabel(label);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// The batches a model runs at: --anvil_batches, plus networks.md's sweep (the CPU batch and the
// GPU batch list) with --anvil_batch_sweep=on; neither given, the paper's CPU batch.
// The name part of a mixed precision ("bf16"); "" for fp32, whose rows keep their names.
std::string precision_name_or_empty(Precision p) {
  return p == Precision::fp32 ? std::string() : std::string(precision_name(p));
}

std::vector<std::int64_t> batches_of(const models::ModelInfo& info) {
  std::vector<std::int64_t> b = options().batches;
  if (options().batch_sweep) {
    b.push_back(info.cpu_batch);
    b.insert(b.end(), info.gpu_batches.begin(), info.gpu_batches.end());
  }
  if (b.empty()) b.push_back(info.cpu_batch);
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}

// Models with LSTM layers also get their training and inference step once per CPU variant of
// the `lstm` table, named model/<name>/<phase>/batch:<b>/threads:<t>/lstm:<variant>.
void register_lstm_variant_steps(const std::string& name,
                                 const std::vector<std::int64_t>& batches) {
  bool has_lstm = false;
  for (const auto& p : models::problems(name, 1))
    has_lstm = has_lstm || std::holds_alternative<LstmProblem>(p.problem);
  if (!has_lstm) return;
  for (const auto& v : lstm_table().variants()) {
    if (v.device != DeviceType::cpu || v.name == "ref") continue;
    for (Phase phase : {Phase::train_step, Phase::inference_step}) {
      for (std::int64_t batch : batches) {
        for (int t : options().threads) {
          const std::string bname =
              detail::str_cat("model/", name, "/", phase_name(phase), "/batch:", batch,
                              "/threads:", t, "/lstm:", v.name);
          benchmark::RegisterBenchmark(bname.c_str(),
                                       [=, variant = v.name](benchmark::State& st) {
                                         run_model(st, name, phase, batch, t, variant);
                                       })
              ->UseManualTime()
              ->Unit(benchmark::kMillisecond)
              ->Iterations(1);  // Note [Whole-step timing]
        }
      }
    }
  }
}

// Note [GPU model benchmarks]
// Registered when gpu_benchmarks_enabled() (bench/gpu_gemm_bench.h: --anvil_gpu=auto|on|off;
// "auto" needs the NVIDIA driver's device node, so a CPU-only machine never loads the CUDA
// backend, Note [Lazy CUDA loading]), after every CPU model benchmark. Timing: CUDA events
// around the whole step on the device's stream (CudaBackend::time_on_stream), manual time;
// memory: the peak bytes of the device's caching allocator during the timed steps.
// Step definitions of the GPU rows: where the batch comes from (models::BatchSource: pinned,
// resident, pageable; --anvil_gpu_inputs), named .../device:cuda/input:<source>. tf32 = the
// GEMMs and convolutions forced to their TF32 variants (cuda.cublas.tf32, cuda.cudnn.tf32) for
// the step, warm-up included; registered for the resident batch only
// (.../device:cuda/input:resident/tf32).

void run_gpu_model(benchmark::State& state, const std::string& name, Phase phase,
                   std::int64_t batch, models::BatchSource source, bool tf32 = false) {
  std::unique_ptr<ForceVariant> force_gemm, force_conv;
  if (tf32) {
    force_gemm = std::make_unique<ForceVariant>("gemm", "cuda.cublas.tf32");
    force_conv = std::make_unique<ForceVariant>("conv2d", "cuda.cudnn.tf32");
  }
  try {
    CudaBackend* cuda = cuda_backend();
    if (cuda == nullptr || cuda->device_count() == 0) {
      state.SkipWithError(("no CUDA device: " + cuda_unavailable_reason()).c_str());
      return;
    }
    const Device dev = Device::cuda(0);
    // Google Benchmark calls this function several times per benchmark while it sizes the
    // iteration count; building fcn5 (118 M parameters drawn on the host, then copied) each time
    // would dominate the run, so the last step object is kept while name, batch and folding
    // stay the same (the training and inference rows of one batch share it).
    // Leaked on purpose: no device memory is handed back during static destruction.
    static auto& cached = *new std::unique_ptr<models::TrainingStep>();
    static std::string cached_key;
    const std::string key = detail::str_cat(name, "/", batch, "/", options().fold_sgd, "/",
                                            models::batch_source_name(source));
    if (!cached || cached_key != key) {
      cached.reset();
      cached_key.clear();
      empty_cache(dev);  // the previous model's blocks would count in this one's reserve
      cached = std::make_unique<models::TrainingStep>(name, batch, /*seed=*/1, options().fold_sgd,
                                                      dev, source);
      cached_key = key;
    }
    models::TrainingStep& steps = *cached;
    auto step = [&] {
      if (phase == Phase::inference_step)
        steps.inference_step();
      else
        steps.train_step();
    };
    // Warm-up outside the timed region: cuBLAS handles and workspaces, the allocator's blocks.
    step();
    step();
    reset_peak_memory(dev);
    host_profile_reset();
    double enqueue_s = 0;  // Note [Host enqueue time] (models/training_step.cpp)
    for (auto _ : state) {
      state.SetIterationTime(cuda->time_on_stream(dev.index, step));
      enqueue_s += steps.last_enqueue_seconds();
    }
    if (state.iterations() > 0)
      state.counters["host_enqueue_ms"] = 1e3 * enqueue_s / static_cast<double>(state.iterations());
    report_host_profile(state,
                        detail::str_cat(name, " ", phase_name(phase), " batch ", batch, " cuda ",
                                        models::batch_source_name(source), tf32 ? " tf32" : ""),
                        static_cast<std::int64_t>(state.iterations()));
    const double fwd = steps.forward_flops();
    const double flops = phase == Phase::train_step ? 3.0 * fwd : fwd;
    state.counters["samples/s"] = benchmark::Counter(static_cast<double>(batch),
                                                     benchmark::Counter::kIsIterationInvariantRate);
    state.counters["FLOP/s"] =
        benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
    const MemoryStats mem = memory_stats(dev);
    state.counters["gpu_alloc_peak_MB"] = static_cast<double>(mem.peak) / 1048576.0;
    state.counters["gpu_reserved_MB"] = static_cast<double>(mem.reserved) / 1048576.0;
    std::string label = dev.str() + " " + cuda->device_name(dev.index) + "; batch " +
                        models::batch_source_name(source) + (tf32 ? "; TF32" : "");
    if (steps.sgd_folded() && phase != Phase::inference_step) label += "; sgd folded into backward";
    state.SetLabel(label);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void register_gpu_model_benchmarks() {
  if (!gpu_benchmarks_enabled()) return;
  for (const auto& name : options().models) {
    const auto& info = models::info(name);
    if (!info.gpu_path) continue;  // ops with CPU kernels only (models/registry.h)
    std::vector<std::int64_t> batches = info.gpu_batches;
    batches.insert(batches.end(), options().batches.begin(), options().batches.end());
    if (batches.empty()) batches.push_back(info.cpu_batch);
    std::sort(batches.begin(), batches.end());
    batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
    for (Phase phase : {Phase::train_step, Phase::inference_step}) {
      for (std::int64_t batch : batches) {
        for (const std::string& input : options().gpu_inputs) {
          const models::BatchSource source = models::parse_batch_source(input);
          const std::string bname = detail::str_cat("model/", name, "/", phase_name(phase),
                                                    "/batch:", batch, "/device:cuda/input:", input);
          benchmark::RegisterBenchmark(
              bname.c_str(),
              [=](benchmark::State& st) { run_gpu_model(st, name, phase, batch, source); })
              ->UseManualTime()
              ->Unit(benchmark::kMillisecond)
              ->MinTime(options().gpu_min_time);
        }
        benchmark::RegisterBenchmark(
            detail::str_cat("model/", name, "/", phase_name(phase), "/batch:", batch,
                            "/device:cuda/input:resident/tf32")
                .c_str(),
            [=](benchmark::State& st) {
              run_gpu_model(st, name, phase, batch, models::BatchSource::resident, true);
            })
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond)
            ->MinTime(options().gpu_min_time / 2);
      }
    }
  }
}

}  // namespace

void register_model_benchmarks() {
  for (const auto& name : options().models) {
    const auto batches = batches_of(models::info(name));
    for (Phase phase : {Phase::train_step, Phase::inference_step, Phase::forward, Phase::backward,
                        Phase::update}) {
      const bool is_phase = phase != Phase::train_step && phase != Phase::inference_step;
      if (is_phase && !options().phases) continue;
      for (std::int64_t batch : batches) {
        for (int t : options().threads) {
          for (const Precision precision : options().precisions) {
            const std::string bname =
                detail::str_cat("model/", name, "/", phase_name(phase), "/batch:", batch,
                                "/threads:", t, precision == Precision::fp32 ? "" : "/precision:",
                                precision_name_or_empty(precision));
            auto* b = benchmark::RegisterBenchmark(bname.c_str(), [=](benchmark::State& st) {
              run_model(st, name, phase, batch, t, {}, precision);
            });
            b->UseManualTime()->Unit(benchmark::kMillisecond);
            // A phase benchmark runs the whole step per iteration but counts only its phase, so
            // a MinTime would mean thousands of steps for a 1 ms update: a fixed count instead.
            // Whole steps: Note [Whole-step timing].
            b->Iterations(is_phase ? kPhaseIterations : 1);
          }
        }
      }
    }
    register_lstm_variant_steps(name, batches);
  }
  register_gpu_model_benchmarks();  // last: Note [GPU model benchmarks]
}

}  // namespace anvil::bench
