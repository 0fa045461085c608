// SPDX-License-Identifier: Apache-2.0
#pragma once
// Shared pieces of the benchmark binary: anvil's own command-line flags, the run context
// (machine, versions, threads, variants) and measurement helpers.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/core/precision.h"
#include "engine/nn/module.h"

namespace anvil::bench {

struct Options {
  std::vector<int> threads;         // thread counts to sweep (--anvil_threads=1,2)
  std::vector<std::string> models;  // model names for step benchmarks (--anvil_models=fcn5)
  // Mini-batch sizes of the model benchmarks (bench/model_bench.cpp): --anvil_batches=16,32,64
  // runs every model at these; --anvil_batch_sweep=on adds each model's networks.md sweep (its
  // CPU batch and its GPU batch list). Neither: the paper's CPU batch of each model.
  std::vector<std::int64_t> batches;
  bool batch_sweep = false;
  // FP32 FMA peak of one core in GFLOP/s: measured at start-up (kernels/cpu/peak/machine_peak.h)
  // unless given with --anvil_peak=G. "% of peak" counters are against threads x this.
  double peak_gflops_per_core = 0.0;
  std::string peak_source;
  // bf16 dot-product (vdpbf16ps) peak of one core in GFLOP/s, measured at start-up when a bf16
  // policy is in --anvil_precision and the CPU has avx512_bf16 (else 0): the ceiling of the
  // bf16 rows' `pct_peak_bf16`, as the FMA peak is `pct_peak`'s.
  double peak_bf16_gflops_per_core = 0.0;
  // Fold plain SGD into backward in training steps (Note [Folded SGD]); --anvil_fold_sgd=off
  // times the ordinary gradient-then-step path.
  bool fold_sgd = true;
  // Also time the training step's phases (forward, backward, update) apart: --anvil_phases=on.
  bool phases = false;
  // The kernel/ family (bench/kernel_bench.cpp): --anvil_kernels=off leaves it unregistered;
  // --anvil_kernel_min_time=S is its MinTime in seconds.
  bool kernels = true;
  double kernel_min_time = 0.3;
  // --anvil_kernel_groups=on adds the op drivers' problem groups (the small shapes of the driver
  // tests) as kernel/ rows, on every table, on each device: the coverage run of
  // tests/bench/test_bench_suite.py, and the only rows of the tables no model layer lists.
  bool kernel_groups = false;
  // --anvil_test_broken_variant=on registers `test.broken`, a GEMM variant that is wrong on
  // purpose (bench/broken_gemm_variant.cpp), to show that validation skips it instead of timing it.
  bool test_broken_variant = false;
  // GPU benchmarks (bench/gpu_gemm_bench.h): "auto" registers them when an NVIDIA driver is
  // present and the CUDA backend reports a device (a machine without a driver never loads the
  // backend, so CPU runs do not pay for it); "on" always asks the backend; "off" never does.
  // --anvil_gpu=auto|on|off.
  std::string gpu = "auto";
  // Step definitions of the GPU model benchmarks (models::BatchSource: pinned, resident,
  // pageable), one row each: --anvil_gpu_inputs=pinned,resident,pageable. The first is the
  // default definition.
  std::vector<std::string> gpu_inputs{"pinned", "resident"};
  // MinTime in seconds of each GPU model-step row (the TF32 rows take half):
  // --anvil_gpu_min_time=S. Lower it to fit more rows into one call of a lent GPU machine
  // (scripts/gpu_kit.sh --part).
  double gpu_min_time = 1.0;
  // GEMM shape groups of the gemm/ and gemm_remedy/ families (bench/gemm_bench.cpp):
  // --anvil_gemm_shapes=dlbench,fcn5,lstm32,deepbench or =all. A model name adds the forward,
  // input-gradient and weight-gradient GEMMs of its layers at its paper CPU batch.
  std::vector<std::string> gemm_shapes{"dlbench", "fcn5"};
  // Problems given on the command line (harness/problem_descriptor.h), each named by its
  // "<op>:<descriptor>" text: --anvil_problem=conv2d:mb16ic64ih56oc64kh3ph1 (repeatable) and
  // --anvil_problem_file=FILE (one per line, # comments). When any is given, the gemm/ and
  // kernel/ families time these problems instead of the shape groups and the models' layers.
  std::vector<nn::NamedProblem> problems;
  // Variants left out of the gemm/ and kernel/ families: --anvil_skip_variant=op=name[,name...]
  // (repeatable; each name must be a variant of the op's table).
  std::map<std::string, std::set<std::string>> skip_variants;
  // Variants left out of the gemm/ and kernel/ families by tag (Note [Variant tags]):
  // --anvil_skip_tag=tf32,nondeterministic (repeatable).
  std::set<std::string> skip_tags;
  // --anvil_mode=check|perf (benchdnn's --mode=C|P); empty: both. check validates every row and
  // times one iteration; perf times without validating (the gemm and conv2d rows; the other
  // kernel rows always validate).
  std::string mode;
  // The autocast policies the CPU model steps run under (--anvil_precision=fp32,bf16; default
  // fp32): each step is built and run inside AutocastGuard{precision}, and a row of a mixed
  // precision is named .../threads:T/precision:bf16 (fp32 rows keep their names).
  std::vector<Precision> precisions{Precision::fp32};
  // The command line as given, for the JSON context (anvil.command_line).
  std::string command_line;
};

// Whether --anvil_skip_variant or --anvil_skip_tag leaves `variant` of table `op` out.
bool skipped(const std::string& op, const std::string& variant);
// Whether the rows validate before timing (not with --anvil_mode=perf).
bool validating();

// Registers a real-time, millisecond row of the gemm/ or kernel/ family: MinTime `min_time` and
// MinWarmUpTime `min_warmup` (when >= 0), or one iteration with --anvil_mode=check (the warm-up
// call is validated; one call is timed).
void register_row(const std::string& name, std::function<void(benchmark::State&)> fn,
                  double min_time, double min_warmup = -1.0);

// Parses the --anvil_* flags (bench/bench_flags.cpp, with CLI11) and removes them from argv: the
// rest goes to Google Benchmark. Applies --anvil_variant=op=name[,...] through
// set_forced_variant(). Throws std::invalid_argument with one line naming the flag and the value
// for a bad value or an unknown --anvil_* flag.
Options parse_options(int& argc, char** argv);
const Options& options();
// anvil's flags, one line each, then Google Benchmark's: the help printer main() hands to
// benchmark::Initialize, which calls it for --help.
void print_help();

// Adds machine, build and configuration facts to the JSON/console context.
void add_context();

// Sets the "pct_peak" counter: achieved FLOP/s as a percentage of threads x the per-core peak.
// `seconds` is the wall time of the timed loop (Google Benchmark 1.7 does not expose it, and a
// rate counter would print a misleading "/s" unit).
void set_pct_peak(benchmark::State& state, double flops_per_iteration, double seconds, int threads);
// Sets "pct_peak_bf16" the same way against the bf16 dot peak, when it was measured.
void set_pct_peak_bf16(benchmark::State& state, double flops_per_iteration, double seconds,
                       int threads);

}  // namespace anvil::bench
