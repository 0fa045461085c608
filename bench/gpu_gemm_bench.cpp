// SPDX-License-Identifier: Apache-2.0
// gemm/<cuda variant>/<mode>/<shape>/device:cuda: every CUDA GEMM variant in the four
// transpose modes on the shapes of the CPU gemm/ family, GPU time by CUDA events, validated
// before timing (Note [GPU GEMM validation], bench/gpu_gemm_bench.h). Registered only when a
// CUDA device is usable; without one the CPU suite is unchanged.
#include "bench/gpu_gemm_bench.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <memory>

#include "bench/bench_support.h"
#include "bench/span_reps.h"
#include "engine/core/cuda_backend.h"
#include "engine/core/error.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/ops/gemm.h"

namespace anvil::bench {
namespace {

// An NVIDIA kernel driver is installed: without one the backend library (about 220 MB with
// cuBLAS) would be loaded only to report "no device", and would then count in every CPU
// benchmark's peak RSS. This looks at files only and loads nothing.
bool nvidia_driver_present() {
  return access("/dev/nvidiactl", F_OK) == 0 || access("/proc/driver/nvidia/version", F_OK) == 0;
}

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ",") + n;
  return s;
}

void run_gpu_gemm(benchmark::State& state, const std::string& variant, bool ta, bool tb,
                  const Shape3& s) {
  try {
    GemmBuffers& host = gemm_buffers(s);
    GemmBuffers& dev = gpu_gemm_buffers(s);
    const Tensor A = ta ? as_matrix(dev.a, s.k, s.m) : as_matrix(dev.a, s.m, s.k);
    const Tensor B = tb ? as_matrix(dev.b, s.n, s.k) : as_matrix(dev.b, s.k, s.n);
    const Tensor C = as_matrix(dev.c, s.m, s.n);
    const Tensor host_a = ta ? as_matrix(host.a, s.k, s.m) : as_matrix(host.a, s.m, s.k);
    const Tensor host_b = tb ? as_matrix(host.b, s.n, s.k) : as_matrix(host.b, s.k, s.n);
    ForceVariant force("gemm", variant);
    state.SetLabel(gemm_table().select(ops::gemm_problem_for(A, ta, B, tb, C, 0.0)).name);
    // C is shared by every variant and mode of this shape: overwrite the previous benchmark's
    // result, so that a variant that leaves C unwritten cannot pass on another one's output.
    Tensor(C).fill_(1e30);
    ops::gemm(A, ta, B, tb, C);  // warm-up (cuBLAS heuristics, module load) and the result to check
    const Tensor host_c = C.to(Device::cpu());
    const std::string bad =
        sampled_mismatch(host_a, ta, host_b, tb, host_c, gpu_gemm_rel_tol(variant));
    if (!bad.empty()) {
      state.SkipWithError(("validation against ref failed: " + bad).c_str());
      return;
    }
    time_gpu_loop(state, 2.0 * s.m * s.n * s.k, [&] { ops::gemm(A, ta, B, tb, C); });
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace

bool gpu_benchmarks_enabled() {
  static const bool enabled = [] {
    const std::string& mode = options().gpu;
    if (mode == "off" || (mode == "auto" && !nvidia_driver_present())) return false;
    if (!cuda_available()) {
      benchmark::AddCustomContext("anvil.cuda", "unavailable: " + cuda_unavailable_reason());
      return false;
    }
    benchmark::AddCustomContext("anvil.cuda", cuda_backend()->version());
    // anvil.variants.gemm (add_context) was written before the backend loaded.
    benchmark::AddCustomContext("anvil.variants.gemm.cuda", join_names(gpu_gemm_variants()));
    return true;
  }();
  return enabled;
}

Device gpu_bench_device() { return Device::cuda(0); }
// "device:cuda", as the GPU model benchmarks (bench/model_bench.cpp): the device part of names
// that scripts/report_sections.py recognises for its CPU vs GPU table.
std::string gpu_name_suffix() { return "device:cuda"; }

std::vector<std::string> gpu_gemm_variants() {
  std::vector<std::string> out;
  for (const auto& v : gemm_table().variants())
    if (v.device == DeviceType::cuda && !skipped("gemm", v.name)) out.push_back(v.name);
  return out;
}

double gpu_gemm_rel_tol(const std::string& variant) {
  return variant.find("tf32") != std::string::npos ? 3e-3 : 1e-5;
}

double gpu_gemm_pair_tol(const std::string& variant, std::int64_t k) {
  // Two results of the same variant by different kernels (other layout, folded beta): FP32 as
  // the CPU remedies (K * FLT_EPSILON); TF32 each within 2^-10 per product of the definition,
  // sum |a||b| ~ K/4 for the uniform inputs, so K * 2^-10 bounds their difference twice over.
  const double kk = static_cast<double>(std::max<std::int64_t>(k, 1));
  return variant.find("tf32") != std::string::npos ? kk * std::ldexp(1.0, -10)
                                                   : kk * 1.1920928955078125e-07;
}

GemmBuffers& gpu_gemm_buffers(const Shape3& s) {
  static std::map<std::string, std::unique_ptr<GemmBuffers>> cache;
  auto& slot = cache[s.name];
  if (!slot) {
    const GemmBuffers& host = gemm_buffers(s);
    auto b = std::make_unique<GemmBuffers>();
    b->a = host.a.to(gpu_bench_device());
    b->b = host.b.to(gpu_bench_device());
    b->c = Tensor::empty({s.m * s.n}, DType::f32, gpu_bench_device());
    slot = std::move(b);
  }
  return *slot;
}

double time_gpu_loop(benchmark::State& state, double flops, const std::function<void()>& enqueue) {
  CudaBackend& cuda = require_cuda("time_gpu_loop");
  const int device = gpu_bench_device().index;
  double total = 0;
  std::int64_t calls = 0;
  int reps = 1;
  try {
    const double one = cuda.time_on_stream(device, enqueue);
    reps = span_reps(state.max_iterations, one);  // a divisor: Google Benchmark's repetitions
    // One span counts as `reps` iterations with the span as their manual time: Google Benchmark
    // sizes the run by manual time, so reporting span / reps per single iteration would make it
    // run reps x MinTime of real GPU time (up to 1000 x 0.5 s for a small GEMM).
    while (state.KeepRunningBatch(reps)) {
      const double span = cuda.time_on_stream(device, [&] {
        for (int r = 0; r < reps; ++r) enqueue();
      });
      state.SetIterationTime(span);
      total += span;
      calls += reps;
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return 0;
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["reps_per_span"] = reps;
  return calls > 0 ? total / static_cast<double>(calls) : 0;
}

void register_gpu_benchmark(const std::string& name, std::function<void(benchmark::State&)> fn) {
  benchmark::RegisterBenchmark(name.c_str(), std::move(fn))
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->MinWarmUpTime(0.1)
      ->MinTime(0.5);
}

void register_gpu_gemm_benchmarks() {
  if (!gpu_benchmarks_enabled()) return;
  const std::vector<std::string> variants = gpu_gemm_variants();
  for (const auto& shape : gemm_shapes())
    for (const auto& variant : variants)
      for (const char* mode : {"NN", "NT", "TN", "TT"}) {
        const bool ta = mode[0] == 'T', tb = mode[1] == 'T';
        register_gpu_benchmark(
            detail::str_cat("gemm/", variant, "/", mode, "/", shape.name, "/", gpu_name_suffix()),
            [=](benchmark::State& st) { run_gpu_gemm(st, variant, ta, tb, shape); });
      }
}

}  // namespace anvil::bench
