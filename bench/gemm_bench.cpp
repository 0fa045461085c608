// gemm/<variant>/<mode>/<shape>/threads:<t>: every CPU GEMM variant (and "default", the
// selection anvil makes without forcing) in the four transpose modes, on the DLBench shape
// (M=1024, N=2048, K=26752) and the distinct GEMM shapes of FCN-5 at batch 64. With a usable
// GPU, also gemm/<cuda variant>/<mode>/<shape>/device:cuda (bench/gpu_gemm_bench.cpp).
//
// Note [Validate before timing]
// Before the timed loop, 48 sampled entries of C are recomputed in double from the same A and B
// (the `ref` formula; the full ref GEMM of the DLBench shape would take a minute) and compared
// with a bound scaled by sum |a||b|; a mismatch turns the benchmark into SkipWithError.
#include <cmath>
#include <map>
#include <chrono>
#include <memory>
#include <random>
#include <set>

#include "bench/bench_support.h"
#include "bench/gemm_bench.h"
#include "bench/gpu_gemm_bench.h"
#include "bench/registrations.h"
#include "engine/anvil/anvil.h"
#include "engine/core/views.h"
#include "engine/ops/gemm.h"

namespace anvil::bench {

GemmBuffers& gemm_buffers(const Shape3& s) {
  static std::map<std::string, std::unique_ptr<GemmBuffers>> cache;
  auto& slot = cache[s.name];
  if (!slot) {
    Generator gen(42);
    slot = std::make_unique<GemmBuffers>();
    slot->a = uniform({s.m * s.k}, -1, 1, DType::f32, &gen);
    slot->b = uniform({s.k * s.n}, -1, 1, DType::f32, &gen);
    slot->c = Tensor::zeros({s.m * s.n});
  }
  return *slot;
}

// Views with the stored layout of the mode: A is [M,K] or stored [K,M] (trans_a), etc.
Tensor as_matrix(const Tensor& flat, std::int64_t rows, std::int64_t cols) {
  return raw::view(flat, {rows, cols});
}

std::string sampled_mismatch(const Tensor& A, bool ta, const Tensor& B, bool tb, const Tensor& C,
                             double rel_tol) {
  const std::int64_t m = C.sizes()[0], n = C.sizes()[1], k = A.sizes()[ta ? 0 : 1];
  const float* a = A.data<float>();
  const float* b = B.data<float>();
  const float* c = C.data<float>();
  std::mt19937_64 rng(7);
  for (int s = 0; s < 48; ++s) {
    const std::int64_t i = static_cast<std::int64_t>(rng() % m), j = static_cast<std::int64_t>(rng() % n);
    double ref = 0, mag = 0;
    for (std::int64_t l = 0; l < k; ++l) {
      const double x = ta ? a[l * m + i] : a[i * k + l];
      const double y = tb ? b[j * k + l] : b[l * n + j];
      ref += x * y;
      mag += std::abs(x * y);
    }
    const double got = c[i * n + j];
    if (std::abs(got - ref) > rel_tol * mag + 1e-6)
      return detail::str_cat("C[", i, ",", j, "] = ", got, " but ref = ", ref);
  }
  return {};
}

namespace {

void run_gemm(benchmark::State& state, const std::string& variant, bool ta, bool tb, Shape3 s,
              int threads) {
  set_num_threads(threads);
  GemmBuffers& buf = gemm_buffers(s);
  const Tensor A = ta ? as_matrix(buf.a, s.k, s.m) : as_matrix(buf.a, s.m, s.k);
  const Tensor B = tb ? as_matrix(buf.b, s.n, s.k) : as_matrix(buf.b, s.k, s.n);
  const Tensor C = as_matrix(buf.c, s.m, s.n);
  const auto force = force_gemm_variant(variant);
  try {
    const GemmProblem p = ops::gemm_problem_for(A, ta, B, tb, C, 0.0);
    state.SetLabel(gemm_table().select(p).name);
    ops::gemm(A, ta, B, tb, C);  // warm-up (primitive creation, page faults) and validation
    const std::string bad = sampled_mismatch(A, ta, B, tb, C);
    if (!bad.empty()) {
      state.SkipWithError(("validation against ref failed: " + bad).c_str());
      return;
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  time_gemm_loop(state, threads, 2.0 * s.m * s.n * s.k, [&] { ops::gemm(A, ta, B, tb, C); });
}

}  // namespace

std::unique_ptr<ForceVariant> force_gemm_variant(const std::string& variant) {
  if (variant == "default") return nullptr;
  return std::make_unique<ForceVariant>("gemm", variant);
}

double time_gemm_loop(benchmark::State& state, int threads, double flops, const std::function<void()>& body) {
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    body();
    benchmark::ClobberMemory();
  }
  const double loop_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  set_pct_peak(state, flops, loop_seconds, threads);
  return loop_seconds;
}

std::vector<Shape3> gemm_shapes() {
  std::vector<Shape3> shapes{{"dlbench_1024x2048x26752", 1024, 2048, 26752}};
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> seen;
  for (const auto& g : models::gemm_problems("fcn5", 64)) {
    const auto& p = g.problem;
    if (!seen.insert({p.m, p.n, p.k}).second) continue;
    shapes.push_back({detail::str_cat("fcn5_b64_", p.m, "x", p.n, "x", p.k), p.m, p.n, p.k});
  }
  return shapes;
}

std::vector<std::string> gemm_bench_variants() {
  std::vector<std::string> variants{"default"};
  for (const auto& v : gemm_table().variants())
    if (v.device == DeviceType::cpu && v.name != "ref") variants.push_back(v.name);
  return variants;
}

void register_gemm_benchmark(const std::string& name, std::function<void(benchmark::State&)> fn) {
  benchmark::RegisterBenchmark(name.c_str(), std::move(fn))
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond)
      ->MinWarmUpTime(0.2)
      ->MinTime(0.5);
}

void register_gemm_benchmarks() {
  const std::vector<std::string> variants = gemm_bench_variants();
  for (const auto& shape : gemm_shapes())
    for (const auto& variant : variants)
      for (const char* mode : {"NN", "NT", "TN", "TT"})
        for (int t : options().threads) {
          const bool ta = mode[0] == 'T', tb = mode[1] == 'T';
          register_gemm_benchmark(detail::str_cat("gemm/", variant, "/", mode, "/", shape.name, "/threads:", t),
                                  [=](benchmark::State& st) { run_gemm(st, variant, ta, tb, shape, t); });
        }
  register_gpu_gemm_benchmarks();  // nothing without a usable CUDA device
}

}  // namespace anvil::bench
