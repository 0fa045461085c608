// SPDX-License-Identifier: Apache-2.0
// gemm/<variant>/<mode>/<shape>/threads:<t>: every CPU GEMM variant (and "default", the
// selection anvil makes without forcing) in the four transpose modes, on the shape groups of
// --anvil_gemm_shapes (default: the DLBench shape M=1024, N=2048, K=26752 and the distinct GEMM
// shapes of FCN-5 at batch 64; `all` adds every FCN and LSTM model's layer GEMMs and a
// DeepBench-style training set). With a usable
// GPU, also gemm/<cuda variant>/<mode>/<shape>/device:cuda (bench/gpu_gemm_bench.cpp).
//
// Note [Validate before timing]
// Before the timed loop, 48 sampled entries of C are recomputed in double from the same A and B
// (the `ref` formula; the full ref GEMM of the DLBench shape would take a minute) and compared
// with a bound scaled by sum |a||b|; a mismatch turns the benchmark into SkipWithError.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "bench/bench_support.h"
#include "bench/gemm_bench.h"
#include "bench/gpu_gemm_bench.h"
#include "bench/registrations.h"
#include "anvil/anvil.h"
#include "engine/core/views.h"
#include "engine/dispatch/lstm_problem.h"
#include "engine/ops/gemm.h"
#include "harness/problem_descriptor.h"

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
    const std::int64_t i = static_cast<std::int64_t>(rng() % m),
                       j = static_cast<std::int64_t>(rng() % n);
    double ref = 0, mag = 0;
    for (std::int64_t l = 0; l < k; ++l) {
      const double x = ta ? a[l * m + i] : a[i * k + l];
      const double y = tb ? b[j * k + l] : b[l * n + j];
      ref += x * y;
      mag += std::abs(x * y);
    }
    const double got = c[i * n + j];
    // Written so that a NaN or inf result fails too (every comparison with NaN is false).
    if (!(std::abs(got - ref) <= rel_tol * mag + 1e-6))
      return detail::str_cat("C[", i, ",", j, "] = ", got, " but ref = ", ref);
  }
  return {};
}

namespace {

void run_gemm(benchmark::State& state, const std::string& variant, bool ta, bool tb,
              const Shape3& s, int threads) {
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
    const std::string bad = validating() ? sampled_mismatch(A, ta, B, tb, C) : std::string();
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

double time_gemm_loop(benchmark::State& state, int threads, double flops,
                      const std::function<void()>& body) {
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    body();
    benchmark::ClobberMemory();
  }
  const double loop_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  state.counters["FLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  set_pct_peak(state, flops, loop_seconds, threads);
  return loop_seconds;
}

namespace {

// A DeepBench-style set of training GEMMs (M, N, K): a selection from the training set of Baidu's
// DeepBench (RNN hidden-state products at small batches, speech-model layers with long N, a
// huge-K embedding product), swept over anvil's four transpose modes like every other shape.
constexpr std::int64_t kDeepBenchShapes[][3] = {
    {1760, 16, 1760},  {1760, 128, 1760}, {1760, 7000, 1760}, {2048, 16, 2048},
    {2048, 128, 2048}, {2560, 64, 2560},  {4096, 128, 4096},  {35, 8457, 2560},
    {7680, 64, 2560},  {3072, 128, 1024}, {1024, 700, 512},   {512, 16, 500000},
};

// The model groups `all` expands to: the DLBench FCNs and LSTMs (their layer GEMMs).
constexpr const char* kGemmModels[] = {"fcn5", "fcn8", "fcn_r", "mlp_mnist", "lstm32", "lstm64"};

void add_shape(std::vector<Shape3>& shapes,
               std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>>& seen,
               std::string name, std::int64_t m, std::int64_t n, std::int64_t k) {
  if (seen.insert({m, n, k}).second) shapes.push_back({std::move(name), m, n, k});
}

}  // namespace

std::vector<Shape3> gemm_shapes() {
  std::vector<std::string> groups = options().gemm_shapes;
  if (std::find(groups.begin(), groups.end(), "all") != groups.end()) {
    groups = {"dlbench"};
    groups.insert(groups.end(), std::begin(kGemmModels), std::end(kGemmModels));
    groups.push_back("deepbench");
  }
  std::vector<Shape3> shapes;
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>>
      seen;  // a shape once, first name wins
  for (const auto& g : groups) {
    if (g == "dlbench") {
      add_shape(shapes, seen, "dlbench_1024x2048x26752", 1024, 2048, 26752);
    } else if (g == "deepbench") {
      for (const auto& d : kDeepBenchShapes)
        add_shape(shapes, seen, detail::str_cat("deepbench_", d[0], "x", d[1], "x", d[2]), d[0],
                  d[1], d[2]);
    } else {  // a model: its layers' GEMMs at its paper CPU batch
      const auto known = models::list();
      if (std::find(known.begin(), known.end(), g) == known.end()) {
        std::string names;
        for (const auto& k : known) names += ", " + k;
        throw std::invalid_argument(detail::str_cat("--anvil_gemm_shapes: unknown group '", g,
                                                    "'; expected dlbench, deepbench, all", names));
      }
      const std::int64_t batch = models::info(g).cpu_batch;
      auto add = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
        add_shape(shapes, seen, detail::str_cat(g, "_b", batch, "_", m, "x", n, "x", k), m, n, k);
      };
      // The layers' GEMMs in model order, except that an LSTM layer's GEMMs live inside the
      // lstm op's kernels (engine/dispatch/lstm_problem.h), so the model lists only its decoder's
      // and the cell's are added after them: input projection hoisted over T ([T*B, I] x
      // [I, 4H]), the per-step recurrent product ([B, H] x [H, 4H]), and in backward dX, dh per
      // step, dW_ih and dW_hh.
      const auto problems = models::problems(g, batch);
      for (const auto& np : problems)
        if (const auto* gp = std::get_if<GemmProblem>(&np.problem)) add(gp->m, gp->n, gp->k);
      for (const auto& np : problems) {
        const auto* lstm = std::get_if<LstmProblem>(&np.problem);
        if (!lstm) continue;
        const LstmProblem& p = *lstm;
        add(p.T * p.B, 4 * p.H, p.I);
        add(p.B, 4 * p.H, p.H);
        add(p.T * p.B, p.I, 4 * p.H);
        add(p.B, p.H, 4 * p.H);
        add(4 * p.H, p.I, p.T * p.B);
        add(4 * p.H, p.H, p.T * p.B);
      }
    }
  }
  return shapes;
}

std::vector<std::string> gemm_bench_variants() {
  std::vector<std::string> variants{"default"};
  for (const auto& v : gemm_table().variants())
    if (v.device == DeviceType::cpu && v.name != "ref" && !skipped("gemm", v.name))
      variants.push_back(v.name);
  return variants;
}

void register_gemm_benchmark(const std::string& name, const Shape3& shape,
                             std::function<void(benchmark::State&)> fn) {
  const double flops = 2.0 * shape.m * shape.n * shape.k;
  register_row(name, std::move(fn), 0.5, flops >= kSelfWarmingFlops ? 0.0 : 0.2);
}

// gemm/<variant>/<mode>/<descriptor>/threads:<t> for the GEMMs of --anvil_problem: dense f32
// CPU problems with beta = 0 (what run_gemm times), in their own mode only.
void register_problem_gemms(const std::vector<std::string>& variants) {
  for (const auto& np : options().problems) {
    const auto* p = std::get_if<GemmProblem>(&np.problem);
    if (!p) continue;
    if (!(*p == GemmProblem::dense(p->m, p->n, p->k, p->trans_a, p->trans_b)))
      throw std::invalid_argument("--anvil_problem=" + np.name +
                                  ": the gemm/ family times dense f32 CPU GEMMs with beta = 0 "
                                  "and batch 1 only");
    const Shape3 shape{harness::descriptor(np.problem), p->m, p->n, p->k};
    const std::string mode = p->mode();
    for (const auto& variant : variants)
      for (int t : options().threads)
        register_gemm_benchmark(
            detail::str_cat("gemm/", variant, "/", mode, "/", shape.name, "/threads:", t), shape,
            [=, ta = p->trans_a, tb = p->trans_b](benchmark::State& st) {
              run_gemm(st, variant, ta, tb, shape, t);
            });
  }
}

void register_gemm_benchmarks() {
  const std::vector<std::string> variants = gemm_bench_variants();
  if (!options().problems.empty()) {  // --anvil_problem: these instead of the shape groups
    register_problem_gemms(variants);
    return;
  }
  for (const auto& shape : gemm_shapes())
    for (const auto& variant : variants)
      for (const char* mode : {"NN", "NT", "TN", "TT"})
        for (int t : options().threads) {
          const bool ta = mode[0] == 'T', tb = mode[1] == 'T';
          register_gemm_benchmark(
              detail::str_cat("gemm/", variant, "/", mode, "/", shape.name, "/threads:", t), shape,
              [=](benchmark::State& st) { run_gemm(st, variant, ta, tb, shape, t); });
        }
  register_gpu_gemm_benchmarks();  // nothing without a usable CUDA device
}

}  // namespace anvil::bench
