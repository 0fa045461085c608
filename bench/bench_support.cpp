// SPDX-License-Identifier: Apache-2.0
// Command-line flags and run context of anvil_bench (bench/bench_support.h).
#include "bench/bench_support.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <fstream>
#include <sstream>
#include <thread>

#include "kernels/cpu/peak/machine_peak.h"
#include "anvil/anvil.h"
#include "engine/core/provenance.h"
#include "engine/dispatch/registration.h"
#include "harness/problem_descriptor.h"

namespace anvil::bench {
namespace {

Options& mutable_options() {
  static Options o;
  return o;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

// "1,2,4" -> {1, 2, 4}; every entry a positive integer.
std::vector<std::int64_t> positive_list(const char* flag, const std::string& v) {
  std::vector<std::int64_t> out;
  for (const auto& item : split(v, ',')) {
    std::size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || n <= 0)
      throw std::invalid_argument(
          std::string(flag) + ": expected positive integers separated by commas, got '" + v + "'");
    out.push_back(n);
  }
  return out;
}

std::string join(const std::vector<std::int64_t>& v) {
  std::string s;
  for (auto x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return s;
}

std::string& command_line() {
  static std::string s;
  return s;
}

// "conv2d=cpu.im2col,cpu.onednn" into skip[op]; every name must be a variant of the op's table.
void parse_skip_variants(const std::string& v, std::map<std::string, std::set<std::string>>& skip) {
  const std::size_t eq = v.find('=');
  const std::string op = v.substr(0, eq);
  if (eq == std::string::npos || eq + 1 == v.size())
    throw std::invalid_argument("--anvil_skip_variant: expected op=name[,name...], got '" + v +
                                "'");
  register_builtin_kernels();
  const VariantTableBase* table = find_variant_table(op);
  if (!table) throw std::invalid_argument("--anvil_skip_variant: unknown op '" + op + "'");
  for (const auto& name : split(v.substr(eq + 1), ',')) {
    bool known = false;
    for (const auto& var : table->list()) known = known || var.name == name;
    if (!known)
      throw std::invalid_argument(
          detail::str_cat("--anvil_skip_variant: ", op, " has no variant '", name, "'"));
    skip[op].insert(name);
  }
}

bool on_off(const char* flag, const std::string& v) {
  if (v != "on" && v != "off")
    throw std::invalid_argument(std::string(flag) + ": expected on or off, got '" + v + "'");
  return v == "on";
}

// A duration flag: a finite number of seconds above 0 (std::stod alone takes "0", "-1", "nan").
double positive_seconds(const char* flag, const std::string& v) {
  std::size_t used = 0;
  double s = 0;
  try {
    s = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || !(s > 0) || !std::isfinite(s))
    throw std::invalid_argument(std::string(flag) + ": expected seconds above 0, got '" + v + "'");
  return s;
}

}  // namespace

// The flag chain below declares `v` in each `else if (const char* v = ...)`, which -Wshadow flags
// although each `v` is used only in its own branch: the idiom is kept, the warning is not.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
Options parse_options(int& argc, char** argv) {
  Options& o = mutable_options();
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int t = 1; t <= hw; t *= 2) o.threads.push_back(t);  // 1, 2, 4, ... up to the hardware
  o.models = {"fcn5"};
  for (int i = 0; i < argc; ++i) {
    if (i) command_line() += ' ';
    command_line() += argv[i];
  }
  int out = 1;
  bool listing = false;  // --benchmark_list_tests: no peak measurement (0.3 s) for a listing
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const std::size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = value("--anvil_threads=")) {
      o.threads.clear();
      for (auto t : positive_list("--anvil_threads", v)) o.threads.push_back(static_cast<int>(t));
    } else if (const char* v = value("--anvil_models=")) {
      o.models = split(v, ',');
    } else if (const char* v = value("--anvil_batches=")) {
      o.batches = positive_list("--anvil_batches", v);
    } else if (const char* v = value("--anvil_batch_sweep=")) {
      o.batch_sweep = on_off("--anvil_batch_sweep", v);
    } else if (const char* v = value("--anvil_variant=")) {
      for (const auto& [op, name] : parse_variant_spec(v)) set_forced_variant(op, name);
    } else if (const char* v = value("--anvil_fold_sgd=")) {
      o.fold_sgd = on_off("--anvil_fold_sgd", v);
    } else if (const char* v = value("--anvil_phases=")) {
      o.phases = on_off("--anvil_phases", v);
    } else if (const char* v = value("--anvil_kernels=")) {
      o.kernels = on_off("--anvil_kernels", v);
    } else if (const char* v = value("--anvil_kernel_groups=")) {
      o.kernel_groups = on_off("--anvil_kernel_groups", v);
    } else if (const char* v = value("--anvil_kernel_min_time=")) {
      o.kernel_min_time = positive_seconds("--anvil_kernel_min_time", v);
    } else if (const char* v = value("--anvil_gpu_min_time=")) {
      o.gpu_min_time = positive_seconds("--anvil_gpu_min_time", v);
    } else if (const char* v = value("--anvil_test_broken_variant=")) {
      o.test_broken_variant = on_off("--anvil_test_broken_variant", v);
    } else if (const char* v = value("--anvil_gpu=")) {
      o.gpu = v;
      if (o.gpu != "auto" && o.gpu != "on" && o.gpu != "off")
        throw std::invalid_argument("--anvil_gpu: expected auto, on or off, got '" + o.gpu + "'");
    } else if (const char* v = value("--anvil_gpu_inputs=")) {
      o.gpu_inputs = split(v, ',');
      for (const auto& s : o.gpu_inputs)
        if (s != "pinned" && s != "resident" && s != "pageable")
          throw std::invalid_argument(
              "--anvil_gpu_inputs: expected pinned, resident or pageable, got '" + s + "'");
    } else if (const char* v = value("--anvil_gemm_shapes=")) {
      o.gemm_shapes = split(v, ',');
    } else if (const char* v = value("--anvil_problem=")) {
      o.problems.push_back({v, harness::parse_op_problem(v)});
    } else if (const char* v = value("--anvil_problem_file=")) {
      for (auto& p : harness::read_problem_file(v)) o.problems.push_back(std::move(p));
    } else if (const char* v = value("--anvil_skip_variant=")) {
      parse_skip_variants(v, o.skip_variants);
    } else if (const char* v = value("--anvil_mode=")) {
      o.mode = v;
      if (o.mode != "check" && o.mode != "perf")
        throw std::invalid_argument("--anvil_mode: expected check or perf, got '" + o.mode + "'");
    } else if (const char* v = value("--anvil_precision=")) {
      o.precisions.clear();
      for (const auto& name : split(v, ',')) {
        const Precision p = parse_precision(name);  // throws naming the text and the choices
        if (p == Precision::tf32)
          throw std::invalid_argument(
              "--anvil_precision: tf32 is a GPU tensor-core mode; the CPU model steps run fp32, "
              "bf16 or fp16");
        if (std::find(o.precisions.begin(), o.precisions.end(), p) == o.precisions.end())
          o.precisions.push_back(p);
      }
    } else if (const char* v = value("--anvil_peak=")) {
      o.peak_gflops_per_core = std::stod(v);
    } else {
      if (a == "--benchmark_list_tests" || a == "--benchmark_list_tests=true") listing = true;
      argv[out++] = argv[i];
    }
  }
  argc = out;
  check_forced_variant_ops();  // --anvil_variant or ANVIL_VARIANT for an op anvil does not have
  if (o.peak_gflops_per_core > 0) {
    o.peak_source = "given with --anvil_peak";
  } else if (listing) {
    o.peak_source = "not measured: only listing the benchmarks";
  } else {
    o.peak_gflops_per_core = measure_fma_flops(1, 0.3) / 1e9;
    o.peak_source = std::string("measured at start-up, 1 thread, ") + fma_isa() + " FMA";
  }
  return o;
}
#pragma GCC diagnostic pop

const Options& options() { return mutable_options(); }

bool skipped(const std::string& op, const std::string& variant) {
  auto it = options().skip_variants.find(op);
  return it != options().skip_variants.end() && it->second.count(variant) > 0;
}

bool validating() { return options().mode != "perf"; }

void register_row(const std::string& name, std::function<void(benchmark::State&)> fn,
                  double min_time, double min_warmup) {
  auto* b = benchmark::RegisterBenchmark(name.c_str(), std::move(fn))
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
  if (options().mode == "check") {
    b->Iterations(1);
    return;
  }
  if (min_warmup >= 0) b->MinWarmUpTime(min_warmup);
  b->MinTime(min_time);
}

void add_context() {
  register_builtin_kernels();
  // Note [Provenance]: anvil.schema, anvil.git_revision, anvil.host, anvil.gpu, ...
  for (const auto& [key, value] : provenance()) benchmark::AddCustomContext("anvil." + key, value);
  benchmark::AddCustomContext("anvil.compiler", ANVIL_CXX_COMPILER);
  benchmark::AddCustomContext("anvil.cpu_model", cpu_model_name());
  benchmark::AddCustomContext("anvil.peak_gflops_per_core",
                              std::to_string(options().peak_gflops_per_core));
  benchmark::AddCustomContext("anvil.peak_source", options().peak_source);
  benchmark::AddCustomContext("anvil.command_line", command_line());
  benchmark::AddCustomContext(
      "anvil.thread_sweep",
      join(std::vector<std::int64_t>(options().threads.begin(), options().threads.end())));
  std::string batches = options().batches.empty() ? "" : join(options().batches);
  if (options().batch_sweep)
    batches += (batches.empty() ? "" : " + ") + std::string("networks.md sweep");
  benchmark::AddCustomContext("anvil.batches", batches.empty() ? "paper CPU batch" : batches);
  benchmark::AddCustomContext("anvil.phases", options().phases ? "on" : "off");
  {
    std::string shapes;
    for (const auto& g : options().gemm_shapes) shapes += (shapes.empty() ? "" : ",") + g;
    benchmark::AddCustomContext("anvil.gemm_shapes", shapes);
  }
  benchmark::AddCustomContext("anvil.fold_sgd", options().fold_sgd ? "on" : "off");
  {
    // The autocast policies of the CPU model steps (Note [Autocast policy]); each row's name says
    // its own (.../precision:bf16; none: fp32).
    std::string precisions;
    for (const Precision p : options().precisions) {
      if (!precisions.empty()) precisions += ',';
      precisions += precision_name(p);
    }
    benchmark::AddCustomContext("anvil.precision", precisions);
  }
  for (const auto& [k, v] : config_summary()) benchmark::AddCustomContext("anvil." + k, v);
  for (auto* table : variant_tables()) {
    std::string names;
    for (const auto& v : table->list()) names += (names.empty() ? "" : ",") + v.name;
    benchmark::AddCustomContext("anvil.variants." + table->op(), names);
    const std::string forced = forced_variant(table->op());
    if (!forced.empty()) benchmark::AddCustomContext("anvil.forced." + table->op(), forced);
  }
  benchmark::AddCustomContext("anvil.autotune", autotune_enabled() ? "on" : "off");
}

void set_pct_peak(benchmark::State& state, double flops_per_iteration, double seconds,
                  int threads) {
  if (seconds <= 0) return;
  const double achieved = flops_per_iteration * static_cast<double>(state.iterations()) / seconds;
  state.counters["pct_peak"] = achieved / (options().peak_gflops_per_core * 1e9 * threads) * 100.0;
}

}  // namespace anvil::bench
