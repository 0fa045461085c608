// SPDX-License-Identifier: Apache-2.0
// kernel/<op>/<variant>/<pass>/<model>:<layer>/threads:<t>: the convolution, pooling, batch-norm
// and LSTM problems that the --anvil_models networks generate (models::problems at the
// model's CPU batch), each deduplicated problem run on every CPU variant of its table.
//
// Note [Kernel benchmarks]
// * Registration only reads problem descriptors (models::problems builds the model
//   shapes-only); every buffer is allocated inside the benchmark, on first use, and the
//   benchmarks of one (problem, pass) run next to each other so that they share their inputs.
// * Problems are deduplicated per model by the table's problem key; the first layer gives the
//   name, and the context entry `anvil.kernel.<model>:<layer>` holds the problem's repr and the
//   other layers sharing it ("also: ...").
// * `default` runs what the op layer would select without forcing (its label names that
//   variant); a named variant runs that variant of the table, and one that does not support the
//   problem is SkipWithError with the table's reason, never left out silently.
// * Validate before timing (as Note [Validate before timing] in gemm_bench.cpp): the warm-up
//   call's outputs are checked against a double-precision reference before anything is timed;
//   a mismatch is SkipWithError naming the entry and both values.
//     conv2d:       48 sampled entries of y / dx / dw (+ 8 of db) recomputed from the
//                   definition in double; bound 1e-5 x sum|terms| (1e-4 for winograd).
//     pooling, BN:  the `ref` variant on f64 copies of the inputs, all entries compared.
//     lstm:         `ref` (anvil::lstm_layer with the LSTM table's reference kernel) on f64
//                   copies: y, h_n, c_n and every gradient, all entries compared.
// * Timing: one explicit warm-up call, real time, MinTime = --anvil_kernel_min_time (0.3 s by
//   default, so that the whole family can be run); counters FLOP/s (problem.flops()),
//   bytes_per_second (problem.bytes()) and pct_peak.
#include "bench/kernel_bench.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <type_traits>

#include "bench/bench_support.h"
#include "bench/registrations.h"
#include "anvil/anvil.h"
#include "engine/dispatch/batch_norm_problem.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/lstm_problem.h"
#include "engine/dispatch/pool_problem.h"
#include "harness/problem_descriptor.h"
#include "models/registry.h"

namespace anvil::bench::kernel {
namespace {

// The table's key and repr of a problem.
std::pair<std::string, std::string> key_and_repr(const OpProblem& p) {
  return std::visit([](const auto& q) { return std::pair{q.key(), q.repr()}; }, p);
}

std::vector<Case> cases_of(const std::string& model) {
  const auto problems = models::problems(model, models::info(model).cpu_batch);
  std::vector<Case> cases;
  std::map<std::string, std::size_t> by_key;  // op + key -> index in cases
  const std::string prefix = model + ":";
  for (const auto& np : problems) {
    if (std::holds_alternative<GemmProblem>(np.problem)) continue;  // the gemm/ family's
    const std::string op = op_name(np.problem);
    const std::string key = key_and_repr(np.problem).first;
    std::string layer = np.name.rfind(prefix, 0) == 0 ? np.name.substr(prefix.size()) : np.name;
    auto [it, fresh] = by_key.emplace(detail::str_cat(op, "|", key), cases.size());
    if (!fresh) {
      cases[it->second].also.push_back(layer);
      continue;
    }
    cases.push_back({model, layer, {}, op, np.problem});
  }
  for (const auto& c : cases) {
    std::string also;
    for (const auto& l : c.also) also += (also.empty() ? "" : ",") + l;
    benchmark::AddCustomContext(
        "anvil.kernel." + c.model + ":" + c.layer,
        key_and_repr(c.problem).second + (also.empty() ? "" : "; also: " + also));
  }
  return cases;
}

}  // namespace

void add(const Case& c, const std::string& variant, const std::string& pass, int threads,
         std::function<void(benchmark::State&)> fn) {
  const std::string name = detail::str_cat("kernel/", c.op, "/", variant, "/", pass, "/", c.model,
                                           ":", c.layer, "/threads:", threads);
  register_row(name, std::move(fn), options().kernel_min_time);
}

void timed_loop(benchmark::State& state, const std::function<void()>& step, double flops,
                double bytes, int threads) {
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    step();
    benchmark::ClobberMemory();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (flops > 0) {
    state.counters["FLOP/s"] =
        benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
    set_pct_peak(state, flops, seconds, threads);
  }
  if (bytes > 0)
    state.SetBytesProcessed(
        static_cast<std::int64_t>(bytes * static_cast<double>(state.iterations())));
}

Tensor random_f32(const Shape& shape, std::uint64_t seed) {
  Generator gen(seed);
  return uniform(shape, -1.0, 1.0, DType::f32, &gen);
}

Tensor distinct_f32(const Shape& shape, std::uint64_t seed) {
  Tensor t = Tensor::empty(shape, DType::f32);
  float* d = t.data<float>();
  const std::int64_t n = t.numel();
  constexpr std::uint64_t kMask = (1u << 22) - 1;
  // An odd multiplier permutes the residues mod 2^22: consecutive indices never collide.
  for (std::int64_t i = 0; i < n; ++i)
    d[i] = static_cast<float>(((static_cast<std::uint64_t>(i) + seed) * 2654435761ull) & kMask) /
               static_cast<float>(1u << 21) -
           1.0f;
  return t;
}

void fill_nan(const Tensor& t) { Tensor(t).fill_(std::numeric_limits<double>::quiet_NaN()); }

std::string compare(const char* what, const Tensor& got, const Tensor& want, double atol,
                    double rtol) {
  if (got.sizes() != want.sizes())
    return detail::str_cat(what, ": shape ", shape_str(got.sizes()), " but ref ",
                           shape_str(want.sizes()));
  const Tensor g = got.to(DType::f64).contiguous(), w = want.to(DType::f64).contiguous();
  const double* a = g.data<double>();
  const double* b = w.data<double>();
  for (std::int64_t i = 0; i < g.numel(); ++i) {
    const double err = std::abs(a[i] - b[i]);
    if (!(err <= atol + rtol * std::abs(b[i])))  // NaN fails
      return detail::str_cat(what, "[flat ", i, "] = ", a[i], " but ref = ", b[i], " (bound ",
                             atol + rtol * std::abs(b[i]), ")");
  }
  return {};
}

void register_case(const Case& c) {
  std::visit(
      [&c]<typename P>(const P&) {
        if constexpr (std::is_same_v<P, GemmProblem>)
          return;  // the gemm/ family (bench/gemm_bench.cpp)
        else if constexpr (std::is_same_v<P, ConvProblem>)
          register_conv(c);
        else if constexpr (std::is_same_v<P, PoolProblem>)
          register_pool(c);
        else if constexpr (std::is_same_v<P, BatchNormProblem>)
          register_batch_norm(c);
        else if constexpr (std::is_same_v<P, LstmProblem>)
          register_lstm(c);
        else  // the memory-bound tables: no model layer lists their problems yet
          throw std::invalid_argument("the kernel/ family has no benchmark for " + c.op +
                                      " problems yet (" + c.layer + ")");
      },
      c.problem);
}

}  // namespace anvil::bench::kernel

namespace anvil::bench {

void register_kernel_benchmarks() {
  if (!options().kernels) return;
  if (!options().problems.empty()) {  // --anvil_problem: these instead of the models' layers
    for (const auto& np : options().problems) {
      if (std::holds_alternative<GemmProblem>(np.problem)) continue;  // the gemm/ family's
      const std::string d = harness::descriptor(np.problem);
      const bool f32_cpu = std::visit(
          [](const auto& q) { return q.dtype == DType::f32 && q.device.is_cpu(); }, np.problem);
      if (!f32_cpu)
        throw std::invalid_argument("--anvil_problem=" + np.name +
                                    ": the kernel/ family times f32 CPU problems only");
      kernel::Case c{"problem", d, {}, op_name(np.problem), np.problem};
      c.only_its_pass = true;
      kernel::register_case(c);
    }
    return;
  }
  std::set<std::string> seen;
  for (const auto& model : options().models) {
    if (!seen.insert(model).second) continue;
    benchmark::AddCustomContext("anvil.kernel_batch." + model,
                                std::to_string(models::info(model).cpu_batch));
    for (const auto& c : kernel::cases_of(model)) kernel::register_case(c);
  }
}

}  // namespace anvil::bench
