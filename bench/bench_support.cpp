// SPDX-License-Identifier: Apache-2.0
// Run context and measurement helpers of anvil_bench (bench/bench_support.h); the flags are
// parsed in bench/bench_flags.cpp.
#include "bench/bench_support.h"

#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "engine/core/provenance.h"
#include "engine/dispatch/registration.h"

namespace anvil::bench {
namespace {

std::string join(const std::vector<std::int64_t>& v) {
  std::string s;
  for (auto x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return s;
}

}  // namespace

bool skipped(const std::string& op, const std::string& variant) {
  auto it = options().skip_variants.find(op);
  if (it != options().skip_variants.end() && it->second.count(variant) > 0) return true;
  if (options().skip_tags.empty()) return false;
  const VariantTableBase* table = find_variant_table(op);
  if (table == nullptr) return false;
  for (const auto& v : table->list())
    if (v.name == variant)
      for (const auto& tag : v.tags)
        if (options().skip_tags.count(tag) > 0) return true;
  return false;
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
  if (options().peak_bf16_gflops_per_core > 0)
    benchmark::AddCustomContext("anvil.peak_bf16_gflops_per_core",
                                std::to_string(options().peak_bf16_gflops_per_core));
  benchmark::AddCustomContext("anvil.command_line", options().command_line);
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

void set_pct_peak_bf16(benchmark::State& state, double flops_per_iteration, double seconds,
                       int threads) {
  const double peak = options().peak_bf16_gflops_per_core;
  if (seconds <= 0 || peak <= 0) return;
  const double achieved = flops_per_iteration * static_cast<double>(state.iterations()) / seconds;
  state.counters["pct_peak_bf16"] = achieved / (peak * 1e9 * threads) * 100.0;
}

}  // namespace anvil::bench
