// SPDX-License-Identifier: Apache-2.0
#pragma once
// Shared pieces of the `kernel` benchmark family (bench/kernel_bench*.cpp):
//   kernel/<op>/<variant>/<pass>/<model>:<layer>/threads:<t>
// one benchmark per deduplicated layer problem of the --anvil_models list x CPU variant of the
// op's table (ref excluded; "default" = no forcing, labelled with the variant selected) x pass x
// thread count. Note [Kernel benchmarks] in kernel_bench.cpp says how they time and validate.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "engine/core/tensor.h"
#include "engine/dispatch/op_problem.h"
#include "engine/dispatch/variant_table.h"

namespace anvil::bench::kernel {

// One problem of one model, after deduplication by problem key.
struct Case {
  std::string model;              // "resnet50"
  std::string layer;              // "layer1.0.conv2": the first layer with this problem
  std::vector<std::string> also;  // the other layers of the model with the same problem
  std::string op;                 // op_name(problem): "conv2d", "max_pool2d", "batch_norm2d", ...
  OpProblem problem;              // as the model's layer builds it (never a GemmProblem here)
  // A problem from --anvil_problem: only its own pass is timed (model problems: every pass).
  bool only_its_pass = false;
};

// Registers kernel/<op>/<variant>/<pass>/<model>:<layer>/threads:<t> with the family's timing
// settings (real time, --anvil_kernel_min_time, milliseconds).
void add(const Case& c, const std::string& variant, const std::string& pass, int threads,
         std::function<void(benchmark::State&)> fn);

// "default" followed by every CPU variant of the table except ref.
template <typename Table>
std::vector<std::string> variants_of(const Table& table) {
  std::vector<std::string> out{"default"};
  for (const auto& v : table.variants())
    if (v.device == DeviceType::cpu && v.name != "ref" && !skipped(table.op(), v.name))
      out.push_back(v.name);
  return out;
}

// "" when `variant` supports p, else "<op> variant <name> does not support <repr>: <reason>".
template <typename Table, typename Problem>
std::string unsupported(const Table& table, const std::string& variant, const Problem& p) {
  for (const auto& cand : table.candidates(p))
    if (cand.name == variant)
      return cand.support.ok ? std::string()
                             : table.op() + " variant " + variant + " does not support " +
                                   p.repr() + ": " + cand.support.reason;
  return table.op() + " has no variant named " + variant;
}

// The timed loop after the caller's warm-up and validation: runs `step` per iteration and sets
// FLOP/s, bytes/s (when bytes > 0) and pct_peak.
void timed_loop(benchmark::State& state, const std::function<void()>& step, double flops,
                double bytes, int threads);

// Inputs: f32 uniform in [-1, 1) from `seed`.
Tensor random_f32(const Shape& shape, std::uint64_t seed);
// f32 values in [-1, 1) that are pairwise distinct within any 2^22 consecutive elements (so a
// pooling window never holds a tie and every max-pool variant routes the gradient alike).
Tensor distinct_f32(const Shape& shape, std::uint64_t seed);
// Fills an f32/f64 tensor with NaN, so an output entry a variant forgets to write fails validation.
void fill_nan(const Tensor& t);

// Compares f32 `got` with the f64 reference `want` element by element:
// |got - want| <= atol + rtol * |want|. Returns "" or the first offending entry with both values.
std::string compare(const char* what, const Tensor& got, const Tensor& want, double atol,
                    double rtol);

// Per-op registration (kernel_bench_conv.cpp, kernel_bench_other.cpp); register_case picks the
// one of the case's problem type.
void register_case(const Case& c);
void register_conv(const Case& c);
void register_pool(const Case& c);
void register_batch_norm(const Case& c);
void register_lstm(const Case& c);

}  // namespace anvil::bench::kernel
