// SPDX-License-Identifier: Apache-2.0
// One harness for every registered `gemm` variant against `ref` computed in f64 (DESIGN.md,
// Tests), plus the selection rules (Note [Variant selection]), forcing and autotune.
//
// Every case builds f32 operands (possibly as views: transposed, padded leading dims, spaced
// batches), asks each variant's supports() about the exact GemmProblem ops::gemm will run, runs
// the variant forced by name, and compares C with the f64 product of the same f32 data. A
// variant that declines a problem is recorded as skipped with its reason (reported via WARN).
#include <catch2/catch.hpp>
#include <omp.h>

#include <algorithm>
#include <exception>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <thread>
#include <tuple>

#include "engine/core/config.h"
#include "engine/core/random.h"
#include "engine/core/views.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/ops/gemm.h"
#include "helpers/gradcheck.h"
#include "helpers/variant_harness.h"
#include "kernels/register.h"

using namespace anvil;
using anvil::test::values_f64;
using Catch::Contains;

namespace {

constexpr float kSentinel = 12345.0f;  // fills memory a GEMM must not touch

// How one operand reaches ops::gemm. op(X) is always the logical [rows, cols] matrix.
struct OperandSpec {
  bool stored_trans = false;  // stored as [cols, rows] (the problem's T mode)
  bool via_view = false;      // passed as a transposed view (flag flipped) instead of a flag
  std::int64_t pad = 0;       // extra columns in the buffer: leading dim > width
  bool spaced_batch = false;  // 3-D: every other matrix of a bigger buffer
};

struct Operand {
  Tensor arg;         // what is passed to ops::gemm
  bool flag = false;  // the trans flag passed with it
  Tensor logical64;   // op(X) as contiguous f64 ([B,] rows, cols)
  double max_abs = 0;
};

Operand make_operand(std::int64_t batch, std::int64_t rows, std::int64_t cols, const OperandSpec& s,
                     Generator& gen) {
  const std::int64_t sr = s.stored_trans ? cols : rows, sc = s.stored_trans ? rows : cols;
  Shape buf_shape = {sr, sc + s.pad};
  if (batch > 0) buf_shape.insert(buf_shape.begin(), s.spaced_batch ? 2 * batch : batch);
  Tensor buf = uniform(buf_shape, -1.0, 1.0, DType::f32, &gen);
  Tensor stored = raw::slice(buf, -1, 0, sc, 1);
  if (batch > 0 && s.spaced_batch) stored = raw::slice(stored, 0, 0, 2 * batch, 2);
  const std::int64_t nd = stored.dim();
  Tensor logical = s.stored_trans ? raw::transpose(stored, nd - 2, nd - 1) : stored;
  Operand op;
  op.logical64 = raw::to_dtype(raw::contiguous(logical), DType::f64);
  if (!op.logical64.is_contiguous()) op.logical64 = raw::clone(op.logical64);
  for (double v : values_f64(logical)) op.max_abs = std::max(op.max_abs, std::fabs(v));
  if (s.via_view) {
    op.arg = raw::transpose(stored, nd - 2, nd - 1);
    op.flag = !s.stored_trans;
  } else {
    op.arg = stored;
    op.flag = s.stored_trans;
  }
  return op;
}

struct GemmCase {
  std::int64_t m = 1, n = 1, k = 1, batch = 0;  // batch 0 = 2-D
  OperandSpec a, b;
  std::int64_t pad_c = 0;
  double alpha = 1.0, beta = 0.0;
  bool nan_c = false;  // pre-fill C with NaN (only with beta == 0)

  std::string describe() const {
    std::ostringstream os;
    os << "M=" << m << " N=" << n << " K=" << k << (batch ? " batch=" + std::to_string(batch) : "")
       << " A:" << (a.stored_trans ? "T" : "N") << (a.via_view ? "(view)" : "")
       << (a.pad ? " lda+" + std::to_string(a.pad) : "") << (a.spaced_batch ? " spaced" : "")
       << " B:" << (b.stored_trans ? "T" : "N") << (b.via_view ? "(view)" : "")
       << (b.pad ? " ldb+" + std::to_string(b.pad) : "") << (b.spaced_batch ? " spaced" : "")
       << (pad_c ? " ldc+" + std::to_string(pad_c) : "") << " alpha=" << alpha << " beta=" << beta
       << (nan_c ? " C=NaN" : "");
    return os.str();
  }
};

// Runs one case on every registered CPU variant (tests/helpers/variant_harness.h) and checks each
// result against the f64 product by `ref`.
void run_case(const GemmCase& gc, test::VariantHarness& harness, std::uint64_t seed) {
  register_builtin_kernels();
  Generator gen(seed);
  const std::int64_t bt = gc.batch;
  const Operand A = make_operand(bt, gc.m, gc.k, gc.a, gen);
  const Operand B = make_operand(bt, gc.k, gc.n, gc.b, gen);
  Shape c_shape = {gc.m, gc.n + gc.pad_c};
  if (bt > 0) c_shape.insert(c_shape.begin(), bt);
  Tensor c_full = Tensor::full(c_shape, kSentinel);
  Tensor c = raw::slice(c_full, -1, 0, gc.n, 1);
  Tensor c0 = uniform(c.sizes(), -1.0, 1.0, DType::f32, &gen);
  if (gc.nan_c) c0.fill_(std::numeric_limits<double>::quiet_NaN());
  c.copy_(c0);
  const Tensor c_full_init = raw::clone(c_full);

  // Reference: the f64 product of the same f32 values, by `ref`.
  Tensor ref = gc.nan_c ? Tensor::zeros(c.sizes(), DType::f64) : raw::to_dtype(c0, DType::f64);
  {
    ForceVariant force("gemm", "ref");
    ops::gemm(A.logical64, false, B.logical64, false, ref, gc.alpha, gc.beta);
  }
  const double max_c0 = gc.nan_c ? 0.0 : anvil::test::max_abs(c0);
  constexpr double kEps32 = std::numeric_limits<float>::epsilon();
  const double tol = 32.0 * kEps32 *
                         std::sqrt(static_cast<double>(std::max<std::int64_t>(gc.k, 1))) *
                         A.max_abs * B.max_abs * std::fabs(gc.alpha) +
                     8.0 * kEps32 * std::fabs(gc.beta) * max_c0 + 1e-30;

  const GemmProblem problem = ops::gemm_problem_for(A.arg, A.flag, B.arg, B.flag, c, gc.beta);
  harness.run(gemm_table(), problem, gc.describe(), [&](const GemmTable::Variant&) {
    c_full.copy_(c_full_init);
    ops::gemm(A.arg, A.flag, B.arg, B.flag, c, gc.alpha, gc.beta);  // forced by the harness
    std::string bad = anvil::test::compare("C", c, ref, tol);
    // Memory outside C's view (the padding columns) is untouched.
    std::int64_t clobbered = 0;
    if (gc.pad_c > 0) {
      const auto full_vals = values_f64(c_full);
      const std::int64_t w = gc.n + gc.pad_c;
      for (std::size_t i = 0; i < full_vals.size(); ++i)
        if (static_cast<std::int64_t>(i) % w >= gc.n && full_vals[i] != kSentinel) ++clobbered;
    }
    if (clobbered > 0)
      bad += std::to_string(clobbered) + " elements of C's padding columns were written";
    return bad;
  });
}

const std::vector<std::int64_t> kOdd = {1, 7, 33, 129};

}  // namespace

// ---- the harness
// ----------------------------------------------------------------------------------

// A case of size (m, n, k) in transpose mode `mode` (bit 0: A stored transposed, bit 1: B).
static GemmCase make_case(std::int64_t m, std::int64_t n, std::int64_t k, int mode) {
  GemmCase gc;
  gc.m = m;
  gc.n = n;
  gc.k = k;
  gc.a.stored_trans = mode & 1;
  gc.b.stored_trans = mode & 2;
  return gc;
}

TEST_CASE("ref gemm matches hand-computed products in all modes", "[gemm][variants]") {
  // op(A) = [[1,2,3],[4,5,6]], op(B) = [[1,0],[0,1],[2,-1]] -> op(A)@op(B) = [[7,-1],[16,-1]].
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector(std::vector<float>{1, 0, 0, 1, 2, -1}, {3, 2});
  ForceVariant force("gemm", "ref");
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO("mode " << (ta ? "T" : "N") << (tb ? "T" : "N"));
      Tensor as = ta ? raw::contiguous(raw::transpose(a, 0, 1)) : a;  // stored [3,2] when T
      Tensor bs = tb ? raw::contiguous(raw::transpose(b, 0, 1)) : b;
      Tensor c = Tensor::from_vector(std::vector<float>{1, 1, 1, 1}, {2, 2});
      ops::gemm(as, ta, bs, tb, c, 2.0, -1.0);  // 2*AB - 1
      CHECK(values_f64(c) == std::vector<double>{13, -3, 31, -3});
    }
}

TEST_CASE("every gemm variant matches ref on odd shapes in all transpose modes",
          "[gemm][variants]") {
  // Every variant runs all of the case's problems (all are f32).
  test::VariantHarness harness(gemm_table(), DeviceType::cpu, 512);
  std::uint64_t seed = 1;
  for (std::int64_t m : kOdd)
    for (std::int64_t n : kOdd)
      for (std::int64_t k : kOdd)
        for (int mode = 0; mode < 4; ++mode)
          for (auto [alpha, beta] : {std::pair{1.0, 0.0}, std::pair{0.5, -1.5}}) {
            GemmCase gc = make_case(m, n, k, mode);
            gc.alpha = alpha;
            gc.beta = beta;
            run_case(gc, harness, ++seed);
          }
  harness.finish();
}

TEST_CASE("every gemm variant ignores NaN in C when beta is 0", "[gemm][variants]") {
  // Every variant runs all of the case's problems (all are f32).
  test::VariantHarness harness(gemm_table(), DeviceType::cpu, 40);
  std::uint64_t seed = 5000;
  for (auto [m, n, k] : {std::tuple{7, 33, 129}, std::tuple{129, 1, 7}, std::tuple{33, 129, 33},
                         std::tuple{1, 7, 1}, std::tuple{64, 48, 300}})
    for (int mode = 0; mode < 4; ++mode)
      for (double alpha : {1.0, 0.5}) {
        GemmCase gc = make_case(m, n, k, mode);
        gc.alpha = alpha;
        gc.beta = 0.0;
        gc.nan_c = true;
        run_case(gc, harness, ++seed);
      }
  harness.finish();
}

TEST_CASE("every gemm variant handles views: transposed, padded leading dims, padded C",
          "[gemm][variants][views]") {
  // Every variant runs all of the case's problems (all are f32).
  test::VariantHarness harness(gemm_table(), DeviceType::cpu, 80);
  std::uint64_t seed = 6000;
  for (auto [m, n, k] : {std::tuple{7, 33, 129}, std::tuple{33, 7, 1}, std::tuple{129, 129, 33},
                         std::tuple{1, 7, 33}, std::tuple{33, 1, 7}})
    for (int mode = 0; mode < 4; ++mode)
      for (int layout = 0; layout < 4; ++layout) {
        GemmCase gc = make_case(m, n, k, mode);
        gc.a.via_view = layout & 1;
        gc.b.via_view = layout & 2;
        gc.a.pad = layout == 0 || layout == 3 ? 5 : 0;
        gc.b.pad = layout == 1 || layout == 3 ? 3 : 0;
        gc.pad_c = layout >= 2 ? 4 : 0;
        gc.alpha = layout == 2 ? -2.0 : 0.5;
        gc.beta = layout == 1 ? 1.0 : -1.5;
        run_case(gc, harness, ++seed);
      }
  harness.finish();
}

TEST_CASE("every gemm variant handles batched 3-D operands", "[gemm][variants][batched]") {
  // Every variant runs all of the case's problems (all are f32).
  test::VariantHarness harness(gemm_table(), DeviceType::cpu, 48);
  std::uint64_t seed = 7000;
  for (auto [m, n, k] :
       {std::tuple{7, 33, 129}, std::tuple{33, 7, 1}, std::tuple{1, 33, 7}, std::tuple{33, 33, 33}})
    for (int mode = 0; mode < 4; ++mode)
      for (int layout = 0; layout < 3; ++layout) {
        GemmCase gc = make_case(m, n, k, mode);
        gc.batch = 3;
        gc.a.via_view = layout == 1;
        gc.b.via_view = layout == 1;
        gc.a.spaced_batch = layout == 2;
        gc.b.pad = layout == 2 ? 2 : 0;
        gc.pad_c = layout == 2 ? 3 : 0;
        gc.alpha = layout == 0 ? 1.0 : 0.5;
        gc.beta = layout == 0 ? 0.0 : -1.5;
        gc.nan_c = layout == 0;
        run_case(gc, harness, ++seed);
      }
  harness.finish();
}

TEST_CASE("every gemm variant matches ref on larger shapes", "[gemm][variants][large]") {
  // Every variant runs all of the case's problems (all are f32).
  test::VariantHarness harness(gemm_table(), DeviceType::cpu, 8);
  std::uint64_t seed = 8000;
  for (int mode = 0; mode < 4; ++mode) {
    run_case(make_case(64, 2048, 300, mode), harness, ++seed);
    GemmCase gc = make_case(200, 96, 1500, mode);
    gc.alpha = 0.5;
    gc.beta = -1.5;
    gc.b.pad = 16;
    run_case(gc, harness, ++seed);
  }
  harness.finish();
}

// Above 2048 rows: M spans more than one row block of cpu.blocked (its mc and the balanced split
// of M), which the shapes above never reach. Small N and K keep the ref cheap.
TEST_CASE("every gemm variant matches ref with more than 2048 rows", "[gemm][variants][large]") {
  // Every variant runs all of the case's problems (all are f32).
  test::VariantHarness harness(gemm_table(), DeviceType::cpu, 8);
  std::uint64_t seed = 8500;
  for (int mode = 0; mode < 4; ++mode)
    for (auto [m, beta] :
         {std::pair{std::int64_t{2100}, 0.0}, std::pair{std::int64_t{4099}, -1.5}}) {
      GemmCase gc = make_case(m, 17, 33, mode);
      gc.alpha = 0.5;
      gc.beta = beta;
      run_case(gc, harness, ++seed);
    }
  harness.finish();
}

// Kernels may call GEMM from their own OpenMP threads (the batch-row-parallel LSTM recurrence,
// Note [Batch-row-parallel recurrence]); each call then runs on its calling thread only. The
// same problem is run outside a region first, so that a oneDNN primitive built for two threads
// exists when the threads ask (the caches key on onednn::threads_for_key(), as oneDNN's own
// does; with 2026's oneDNN 2.6 this shape was also right when they reused the 2-thread one).
TEST_CASE("every gemm variant is right when called from inside an OpenMP parallel region",
          "[gemm][variants][threads]") {
  register_builtin_kernels();
  const int saved_threads = get_num_threads();
  set_num_threads(2);
  constexpr std::int64_t kRows = 64, kN = 1024, kK = 256;  // the LSTM's per-thread step (NT)
  Generator gen(4242);
  const Tensor a = uniform({2 * kRows, kK}, -1, 1, DType::f32, &gen);
  const Tensor b = uniform({kN, kK}, -1, 1, DType::f32, &gen);
  Tensor want = Tensor::zeros({2 * kRows, kN}, DType::f64);
  {
    ForceVariant force("gemm", "ref");
    ops::gemm(raw::to_dtype(a, DType::f64), false, raw::to_dtype(b, DType::f64), true, want, 1.0,
              0.0);
  }
  const std::vector<double> w = values_f64(want);
  for (const auto& v : gemm_table().variants()) {
    const std::string name = v.name;
    const Tensor a0 = raw::slice(a, 0, 0, kRows, 1);
    Tensor c_outside = Tensor::zeros({kRows, kN});
    const GemmProblem problem = ops::gemm_problem_for(a0, false, b, true, c_outside, 0.0);
    if (v.device != problem.device_type() || (v.supports && !v.supports(problem).ok)) continue;
    INFO("variant " << name << " on " << problem.repr());
    {
      ForceVariant force("gemm", name);  // first call outside any region: caches its primitive
      ops::gemm(a0, false, b, true, c_outside, 1.0, 0.0);
    }
    Tensor c = Tensor::full({2 * kRows, kN}, kSentinel);
    std::exception_ptr errors[2];
#pragma omp parallel num_threads(2)
    {
      const int t = omp_get_thread_num();
      try {
        ForceVariant force("gemm", name);  // forcing is per thread
        Tensor ct = raw::slice(c, 0, t * kRows, (t + 1) * kRows, 1);
        ops::gemm(raw::slice(a, 0, t * kRows, (t + 1) * kRows, 1), false, b, true, ct, 1.0, 0.0);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    }
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    const std::vector<double> got = values_f64(c);
    double worst = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - w[i]));
    CHECK(worst < 1e-3);  // K = 256 products of values in [-1, 1]
  }
  set_num_threads(saved_threads);
}

TEST_CASE("views map onto transpose modes and leading dims without copies", "[gemm][views]") {
  Tensor w = Tensor::ones({5, 4});  // [out, in]
  Tensor x = Tensor::ones({3, 4});
  Tensor c = Tensor::zeros({3, 5});
  GemmProblem p = ops::gemm_problem_for(x, false, w.t(), false, c, 0.0);  // x @ W^T
  CHECK(p.mode() == "NT");
  CHECK(p.ldb == 4);
  CHECK(p.m == 3);
  CHECK(p.n == 5);
  CHECK(p.k == 4);
  CHECK(p.beta_zero);
  Tensor wide = Tensor::ones({3, 10});
  p = ops::gemm_problem_for(wide.slice(1, 2, 6), false, w.t(), false, c, 1.0);
  CHECK(p.mode() == "NT");
  CHECK(p.lda == 10);
  CHECK_FALSE(p.beta_zero);
  Tensor cwide = Tensor::zeros({3, 9});
  p = ops::gemm_problem_for(x, false, w, true, cwide.slice(1, 0, 5), 0.0);
  CHECK(p.ldc == 9);
  CHECK(p.mode() == "NT");
  p = ops::gemm_problem_for(x.t(), true, w, true, c, 0.0);  // op(x^T) = x: the flag flips back
  CHECK(p.mode() == "NT");
  CHECK(p.lda == 4);
  Tensor a3 = Tensor::ones({2, 4, 3});
  p = ops::gemm_problem_for(a3.transpose(1, 2), false, Tensor::ones({2, 4, 5}), false,
                            Tensor::zeros({2, 3, 5}), 0.0);
  CHECK(p.mode() == "TN");
  CHECK(p.batch == 2);
  CHECK(p.stride_a == 12);
  CHECK(p.stride_c == 15);
  // Degenerate K: C = beta * C without calling a variant; beta 0 clears NaNs.
  Tensor cz = Tensor::full({2, 3}, std::numeric_limits<double>::quiet_NaN());
  ops::gemm(Tensor::ones({2, 0}), false, Tensor::ones({0, 3}), false, cz, 1.0, 0.0);
  CHECK(values_f64(cz) == std::vector<double>(6, 0.0));
  Tensor cb = Tensor::full({2, 3}, 2.0);
  ops::gemm(Tensor::ones({2, 0}), false, Tensor::ones({0, 3}), false, cb, 1.0, -1.5);
  CHECK(values_f64(cb) == std::vector<double>(6, -3.0));
  CHECK(ops::mm(Tensor::ones({0, 3}), false, Tensor::ones({3, 4}), false).sizes() == Shape{0, 4});
}

// ---- selection: a pure function
// --------------------------------------------------------------------

TEST_CASE("select_variant follows the rules of Note [Variant selection]", "[selection]") {
  const std::vector<Candidate> all_ok = {
      {"fast", Support::yes()}, {"mid", Support::yes()}, {"ref", Support::yes()}};
  SelectionPolicy none;
  CHECK(select_variant("op", "P", all_ok, none) == 0);  // first supported in order

  SECTION("forced wins over everything") {
    SelectionPolicy p;
    p.forced = "mid";
    p.tuned_winner = "fast";
    p.heuristic_pick = "fast";
    CHECK(select_variant("op", "P", all_ok, p) == 1);
    p.forced = "ref";
    CHECK(select_variant("op", "P", all_ok, p) == 2);
  }
  SECTION("forced unknown name is an error listing every name") {
    SelectionPolicy p;
    p.forced = "nope";
    CHECK_THROWS_WITH(select_variant("myop", "P", all_ok, p),
                      Contains("myop") && Contains("'nope'") && Contains("fast, mid, ref"));
  }
  SECTION("forced but unsupported is an error with the reason, never a fallback") {
    const std::vector<Candidate> c = {{"fast", Support::no("needs K % 8 == 0")},
                                      {"ref", Support::yes()}};
    SelectionPolicy p;
    p.forced = "fast";
    CHECK_THROWS_WITH(select_variant("gemm", "gemm f32 M=3", c, p),
                      Contains("gemm") && Contains("'fast'") && Contains("gemm f32 M=3") &&
                          Contains("needs K % 8 == 0"));
  }
  SECTION("autotuned winner, then heuristic, then first supported") {
    SelectionPolicy p;
    p.tuned_winner = "mid";
    p.heuristic_pick = "ref";
    CHECK(select_variant("op", "P", all_ok, p) == 1);
    p.tuned_winner = "";
    CHECK(select_variant("op", "P", all_ok, p) == 2);  // heuristic pick used when supported
    p.tuned_winner = "gone";                           // unknown tuned name: ignored
    CHECK(select_variant("op", "P", all_ok, p) == 2);
    const std::vector<Candidate> c = {
        {"fast", Support::yes()}, {"mid", Support::no("too small")}, {"ref", Support::yes()}};
    p.tuned_winner = "mid";    // winner no longer supports -> heuristic
    p.heuristic_pick = "mid";  // heuristic unsupported -> first supported
    CHECK(select_variant("op", "P", c, p) == 0);
    p.heuristic_pick = "nonexistent";
    CHECK(select_variant("op", "P", c, p) == 0);
  }
  SECTION("first supported in the table's order") {
    const std::vector<Candidate> c = {
        {"fast", Support::no("f32 only")}, {"mid", Support::yes()}, {"ref", Support::yes()}};
    CHECK(select_variant("op", "P", c, none) == 1);
    const std::vector<Candidate> only_ref = {
        {"fast", Support::no("a")}, {"mid", Support::no("b")}, {"ref", Support::yes()}};
    CHECK(select_variant("op", "P", only_ref, none) == 2);
  }
  SECTION("nothing supports: the error lists every variant's reason") {
    const std::vector<Candidate> c = {{"fast", Support::no("reason one")},
                                      {"mid", Support::no("reason two")},
                                      {"ref", Support::no("ref handles f32 and f64 only")}};
    CHECK_THROWS_WITH(select_variant("gemm", "gemm i32 M=1", c, none),
                      Contains("gemm") && Contains("gemm i32 M=1") &&
                          Contains("fast: reason one") && Contains("mid: reason two") &&
                          Contains("ref: ref handles f32 and f64 only"));
    CHECK_THROWS_WITH(select_variant("gemm", "P", {}, none), Contains("no variants registered"));
  }
}

TEST_CASE("ForceVariant nests, restores and is per thread, set_forced_variant is global",
          "[selection]") {
  const std::string base = forced_variant("gemm");  // ANVIL_VARIANT may set one
  {
    ForceVariant outer("gemm", "ref");
    CHECK(forced_variant("gemm") == "ref");
    {
      ForceVariant inner("gemm", "cpu.other");
      CHECK(forced_variant("gemm") == "cpu.other");
      ForceVariant other_op("elementwise", "ref");
      CHECK(forced_variant("elementwise") == "ref");
      CHECK(forced_variant("gemm") == "cpu.other");
    }
    CHECK(forced_variant("gemm") == "ref");
    std::string seen_by_thread = "unset";
    std::thread t([&] { seen_by_thread = forced_variant("gemm"); });
    t.join();
    CHECK(seen_by_thread == base);
  }
  CHECK(forced_variant("gemm") == base);
  // The process-wide setting applies to every thread; a guard overrides it on its thread.
  set_forced_variant("gemm", "global.pick");
  CHECK(forced_variant("gemm") == "global.pick");
  {
    ForceVariant g("gemm", "ref");
    CHECK(forced_variant("gemm") == "ref");
  }
  std::string seen_by_thread;
  std::thread t([&] { seen_by_thread = forced_variant("gemm"); });
  t.join();
  CHECK(seen_by_thread == "global.pick");
  set_forced_variant("gemm", "");
  CHECK(forced_variant("gemm") == base);
}

TEST_CASE("forcing reaches dispatch: unknown names fail and list the variants",
          "[selection][gemm]") {
  register_builtin_kernels();
  const GemmProblem p = GemmProblem::dense(4, 4, 4, false, false);
  {
    ForceVariant f("gemm", "ref");
    CHECK(gemm_table().select(p).name == "ref");
  }
  {
    ForceVariant f("gemm", "no.such.variant");
    CHECK_THROWS_WITH(ops::mm(Tensor::ones({2, 2}), false, Tensor::ones({2, 2}), false),
                      Contains("gemm") && Contains("no.such.variant") && Contains("ref"));
  }
  // Every registered variant, forced, is what select() returns when it supports the problem.
  for (const auto& v : gemm_table().variants()) {
    const auto cands = gemm_table().candidates(p);
    ForceVariant f("gemm", v.name);
    bool ok = false;
    for (const auto& c : cands)
      if (c.name == v.name) ok = c.support.ok;
    if (ok)
      CHECK(gemm_table().select(p).name == v.name);
    else
      CHECK_THROWS_WITH(gemm_table().select(p), Contains(v.name) && Contains("does not support"));
  }
  // Integer GEMMs: nothing supports them, and the error lists every variant with its reason.
  GemmProblem pi = p;
  pi.dtype = DType::i32;
  std::string msg;
  try {
    gemm_table().select(pi);
  } catch (const Error& e) {
    msg = e.what();
  }
  INFO(msg);
  CHECK_THAT(msg, Contains("no variant supports") && Contains("i32"));
  for (const auto& v : gemm_table().variants()) CHECK_THAT(msg, Contains(v.name + ": "));
}

TEST_CASE("parse_variant_spec", "[selection]") {
  using M = std::map<std::string, std::string>;
  CHECK(parse_variant_spec("") == M{});
  CHECK(parse_variant_spec("gemm=cpu.eigen") == M{{"gemm", "cpu.eigen"}});
  CHECK(parse_variant_spec("gemm=cpu.onednn,elementwise=ref") ==
        M{{"gemm", "cpu.onednn"}, {"elementwise", "ref"}});
  CHECK(parse_variant_spec("gemm=a,,gemm=b,") ==
        M{{"gemm", "b"}});  // empty items skipped, last wins
  CHECK(parse_variant_spec("conv=cuda.cudnn.implicit_gemm") ==
        M{{"conv", "cuda.cudnn.implicit_gemm"}});
  CHECK_THROWS_WITH(parse_variant_spec("gemm"),
                    Contains("parse_variant_spec") && Contains("'gemm'"));
  CHECK_THROWS_WITH(parse_variant_spec("gemm="),
                    Contains("parse_variant_spec") && Contains("op=name"));
  CHECK_THROWS_WITH(parse_variant_spec("=ref"),
                    Contains("parse_variant_spec") && Contains("'=ref'"));
  CHECK_THROWS_WITH(parse_variant_spec("gemm=ref,oops"), Contains("'oops'"));
}

// ---- VariantTable on a private op
// ------------------------------------------------------------------

namespace {
struct FakeProblem {
  int size = 0;
  DeviceType device = DeviceType::cpu;
  DeviceType device_type() const { return device; }
  bool operator==(const FakeProblem&) const = default;
  auto fields() const { return std::tie(size, device); }
  std::string key() const { return "fake " + std::to_string(size); }
  std::string repr() const { return "fake size=" + std::to_string(size); }
};
struct FakeArgs {
  FakeProblem problem;
  std::string* ran = nullptr;
};
using FakeTable = VariantTable<FakeProblem, FakeArgs>;

FakeTable& fake_table() {
  // Static: tables register themselves in the global index for the life of the process.
  static FakeTable* table = [] {
    auto* t = new FakeTable("test.fake");
    auto runs_as = [](const std::string& name) {
      return [name](const FakeArgs& a) { *a.ran = name; };
    };
    t->set_order({"gpu", "big", "small", "ref"});  // Note [Variant order]
    t->add({.name = "ref", .supports = nullptr, .fn = runs_as("ref")});
    t->add({.name = "small",
            .supports =
                [](const FakeProblem& p) {
                  return p.size <= 8 ? Support::yes() : Support::no("size > 8");
                },
            .fn = runs_as("small")});
    t->add({.name = "big",
            .supports =
                [](const FakeProblem& p) {
                  return p.size >= 4 ? Support::yes() : Support::no("size < 4");
                },
            .fn = runs_as("big")});
    t->add({.name = "gpu", .device = DeviceType::cuda, .supports = nullptr, .fn = runs_as("gpu")});
    return t;
  }();
  return *table;
}

struct AutotuneReset {
  ~AutotuneReset() {
    set_autotune(false);
    for (auto* t : variant_tables()) t->clear_autotune_cache();
  }
};
}  // namespace

TEST_CASE("VariantTable keeps the declared order with ref last and selects by the rules",
          "[selection]") {
  FakeTable& t = fake_table();
  std::vector<std::string> names;
  for (const auto& v : t.variants()) names.push_back(v.name);
  CHECK(names == std::vector<std::string>{"gpu", "big", "small", "ref"});  // ref added first
  CHECK(find_variant_table("test.fake") == &t);
  CHECK_THROWS_WITH(t.add({.name = "big", .fn = [](const FakeArgs&) {}}),
                    Contains("test.fake") && Contains("'big'") && Contains("twice"));
  const auto cands = t.candidates({2});
  REQUIRE(cands.size() == 4);
  CHECK_FALSE(cands[0].support.ok);
  CHECK_THAT(cands[0].support.reason, Contains("cuda"));
  CHECK_THAT(cands[1].support.reason, Contains("size < 4"));
  std::string ran;
  t.run({{2}, &ran});
  CHECK(ran == "small");
  t.run({{6}, &ran});
  CHECK(ran == "big");
  t.run({{100}, &ran});
  CHECK(ran == "big");
  t.set_heuristic(
      [](const FakeProblem& p) { return p.size == 6 ? std::string("small") : std::string(); });
  t.run({{6}, &ran});
  CHECK(ran == "small");
  t.run({{7}, &ran});
  CHECK(ran == "big");
  {
    ForceVariant f("test.fake", "ref");
    t.run({{6}, &ran});
    CHECK(ran == "ref");
  }
  {
    ForceVariant f("test.fake", "small");
    CHECK_THROWS_WITH(t.run({{100}, &ran}), Contains("'small'") && Contains("size > 8"));
  }
  t.set_heuristic(nullptr);
}

TEST_CASE("autotune times each supporting non-ref variant once per problem and caches the winner",
          "[selection][autotune]") {
  AutotuneReset reset;
  FakeTable& t = fake_table();
  t.clear_autotune_cache();
  set_autotune(true);
  std::map<std::string, int> timed;
  auto timer = [&](const FakeTable::Variant& v) {
    ++timed[v.name];
    return v.name == "small" ? 1e-6 : 1e-3;  // "small" is the fastest
  };
  CHECK(t.select({6}, timer).name == "small");
  CHECK(timed.count("ref") == 0);  // ref is never a candidate
  CHECK(timed.count("gpu") == 0);  // wrong device
  CHECK(timed["small"] >= 1);
  CHECK(timed["big"] >= 1);
  const auto before = timed;
  CHECK(t.select({6}, timer).name == "small");  // cached: no more timing
  CHECK(timed == before);
  CHECK(t.select({100}, timer).name == "big");  // a new problem is timed; only "big" supports it
  CHECK(timed["big"] > before.at("big"));
  {
    ForceVariant f("test.fake", "big");  // forcing beats the tuned winner and skips timing
    // The copy is the point: select() must leave `timed` as it was.
    const auto snapshot = timed;  // NOLINT(performance-unnecessary-copy-initialization)
    CHECK(t.select({5}, timer).name == "big");
    CHECK(timed == snapshot);
  }
  t.clear_autotune_cache();
  timed.clear();
  CHECK(t.select({6}, timer).name == "small");
  CHECK(timed["small"] >= 1);  // re-timed after clearing
  set_autotune(false);
  CHECK(t.select({6}, timer).name == "big");  // back to the table's order
}

TEST_CASE("autotune on the gemm table picks a supporting non-ref variant and keeps C right",
          "[selection][autotune][gemm]") {
  register_builtin_kernels();
  AutotuneReset reset;
  gemm_table().clear_autotune_cache();
  set_autotune(true);
  const GemmProblem p = GemmProblem::dense(24, 40, 16, false, true);
  std::vector<std::string> supporting;
  const auto cands = gemm_table().candidates(p);
  for (const auto& c : cands)
    if (c.support.ok && c.name != "ref") supporting.push_back(c.name);
  std::map<std::string, int> timed;
  const std::string target = supporting.empty() ? "" : supporting.back();
  auto timer = [&](const GemmTable::Variant& v) {
    ++timed[v.name];
    return v.name == target ? 1e-6 : 1e-3;
  };
  const std::string picked = gemm_table().select(p, timer).name;
  if (supporting.empty()) {
    WARN("only `ref` supports " << p.repr() << ": autotune has nothing to time");
    CHECK(picked == "ref");
    CHECK(timed.empty());
  } else {
    CHECK(picked == target);
    CHECK(timed.count("ref") == 0);
    for (const auto& [name, count] : timed)
      CHECK(std::find(supporting.begin(), supporting.end(), name) != supporting.end());
    CHECK(timed.size() == supporting.size());
    const auto before = timed;
    CHECK(gemm_table().select(p, timer).name == target);  // cached
    CHECK(timed == before);
  }
  // End to end through ops::gemm with real timing: trials must not disturb a C that is read.
  Generator gen(77);
  Tensor a = uniform({33, 17}, -1, 1, DType::f32, &gen),
         b = uniform({17, 29}, -1, 1, DType::f32, &gen);
  Tensor c0 = uniform({33, 29}, -1, 1, DType::f32, &gen);
  Tensor c = raw::clone(c0);
  ops::gemm(a, false, b, false, c, 1.0, 1.0);
  Tensor want = raw::to_dtype(c0, DType::f64);
  {
    ForceVariant f("gemm", "ref");
    ops::gemm(raw::to_dtype(a, DType::f64), false, raw::to_dtype(b, DType::f64), false, want, 1.0,
              1.0);
  }
  CHECK(anvil::test::max_abs_diff(c, want) < 1e-4);
  Tensor c2 = Tensor::full({33, 29}, std::numeric_limits<double>::quiet_NaN());
  ops::gemm(a, false, b, false, c2, 1.0, 0.0);
  Tensor want2 = Tensor::zeros({33, 29}, DType::f64);
  {
    ForceVariant f("gemm", "ref");
    ops::gemm(raw::to_dtype(a, DType::f64), false, raw::to_dtype(b, DType::f64), false, want2, 1.0,
              0.0);
  }
  CHECK(anvil::test::max_abs_diff(c2, want2) < 1e-4);
}

TEST_CASE("an opt-in variant runs only when forced: not by default, heuristic or autotune",
          "[selection][autotune]") {
  AutotuneReset reset;
  // A private table: "approx" is first in the order and the fastest, but opt-in (like TF32).
  static FakeTable* t = [] {
    auto* table = new FakeTable("test.opt_in");
    auto runs_as = [](const std::string& name) {
      return [name](const FakeArgs& a) { *a.ran = name; };
    };
    table->set_order({"approx", "exact", "ref"});
    table->add({.name = "ref", .fn = runs_as("ref")});
    table->add({.name = "exact", .fn = runs_as("exact")});
    table->add({.name = "approx", .fn = runs_as("approx"), .opt_in = true});
    return table;
  }();
  std::string ran;
  t->run({{3}, &ran});
  CHECK(ran == "exact");
  t->set_heuristic([](const FakeProblem&) { return std::string("approx"); });
  t->run({{3}, &ran});
  CHECK(ran == "exact");
  t->set_heuristic(nullptr);
  set_autotune(true);
  std::map<std::string, int> timed;
  auto timer = [&](const FakeTable::Variant& v) {
    ++timed[v.name];
    return v.name == "approx" ? 1e-9 : 1e-3;
  };
  CHECK(t->select({3}, timer).name == "exact");
  CHECK(timed.count("approx") == 0);
  set_autotune(false);
  {
    ForceVariant f("test.opt_in", "approx");
    t->run({{3}, &ran});
    CHECK(ran == "approx");
  }
  const auto cands = t->candidates({3});
  CHECK(cands[0].support.ok);  // listing still shows it as able to run the problem
}
