// SPDX-License-Identifier: Apache-2.0
#pragma once
// GPU side of the GEMM families, registered only when a CUDA device is usable
// (gpu_benchmarks_enabled): gemm/<cuda variant>/<mode>/<shape>/device:cuda here
// (bench/gpu_gemm_bench.cpp) and the remedies gemm_remedy/<cuda variant>/.../device:cuda in
// bench/gemm_remedy_bench.cpp. No CUDA header: the work goes through the engine (the gemm table
// via ops::gemm with the variant forced, Tensors on cuda:0) and the GPU time comes from
// CudaBackend::time_on_stream (CUDA events around the enqueued work).
//
// Note [GPU GEMM validation]
// Before timing, each benchmark runs its variant once on its own GPU inputs, copies C back and
// checks it against the double-precision definition at 48 sampled entries (the CPU suite's
// Note [Validate before timing]) with a bound rel_tol * sum_l |a_il b_lj| + 1e-6:
//   * FP32 variants (cuda.cublas, cuda.custom.gemm_tiled): rel_tol = 1e-5, as on the CPU;
//   * cuda.cublas.tf32: rel_tol = 3e-3. TF32 keeps 10 mantissa bits of each input, so each
//     product is off by at most (2u + u^2)|a||b| with u = 2^-10 when inputs are truncated
//     (half that when rounded), i.e. 2e-3 of sum |a||b| in the worst case, plus FP32
//     accumulation; 3e-3 leaves room for that and nothing more (a wrong result is off by O(1)).
// A mismatch or an exception (a variant refusing the problem) is SkipWithError, never a time.
#include <benchmark/benchmark.h>

#include <functional>
#include <string>
#include <vector>

#include "bench/gemm_bench.h"
#include "engine/core/device.h"

namespace anvil::bench {

// Whether to register GPU benchmarks (Options::gpu, then cuda_available()); decided on the
// first call, which also adds the CUDA context entries (anvil.cuda, anvil.variants.gemm.cuda).
bool gpu_benchmarks_enabled();
// The device the GPU benchmarks run on (cuda:0) and the last part of their names,
// "device:cuda", which stands where CPU benchmarks have threads:<t>.
Device gpu_bench_device();
std::string gpu_name_suffix();

// Every variant of the gemm table that runs on CUDA, in priority order.
std::vector<std::string> gpu_gemm_variants();
// rel_tol of Note [GPU GEMM validation] for `variant`, and the bound for comparing two full
// GPU results of the same variant over K products (the remedies against the direct mode).
double gpu_gemm_rel_tol(const std::string& variant);
double gpu_gemm_pair_tol(const std::string& variant, std::int64_t k);

// Copies on the GPU of gemm_buffers(s)'s a and b (the very values the CPU suite uses) and a C
// of M*N elements, made on first use and kept per shape.
GemmBuffers& gpu_gemm_buffers(const Shape3& s);

// The timed loop of a GPU benchmark (manual time): each span enqueues `enqueue` `reps` times
// back to back inside one CudaBackend::time_on_stream span and counts as `reps` iterations
// (KeepRunningBatch) timed by the span, so one iteration is one enqueue and MinTime is GPU
// time; reps (span_reps) is chosen once so that a span holds about 1 ms of GPU work (launch
// latency and the events' own cost then do not count for small GEMMs). Sets the FLOP/s counter
// (`flops` per enqueue) and `reps_per_span`. An exception inside the loop becomes
// SkipWithError. Returns the mean GPU seconds of one enqueue (0 after an error).
double time_gpu_loop(benchmark::State& state, double flops, const std::function<void()>& enqueue);

// Registers `fn` as `name` with manual time, ms, 0.1 s warm-up and 0.5 s minimum time.
void register_gpu_benchmark(const std::string& name, std::function<void(benchmark::State&)> fn);

// gemm/<cuda variant>/<NN|NT|TN|TT>/<shape>/device:cuda for every shape of gemm_shapes().
void register_gpu_gemm_benchmarks();
// gemm_remedy/<cuda variant>/... (bench/gemm_remedy_bench.cpp).
void register_gpu_gemm_remedy_benchmarks();

}  // namespace anvil::bench
