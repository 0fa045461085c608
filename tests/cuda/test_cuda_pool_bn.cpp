// SPDX-License-Identifier: Apache-2.0
// The GPU pooling and batch-norm variants (cuda.custom, cuda.cudnn) against the CPU `ref`: every
// variant, every pass, f32 and f64, on odd shapes and on the real layer problems of alexnet,
// vgg16, resnet50, cnn_mnist and cnn_cifar (models::problems); max-pool index semantics
// (first maximum wins ties, the last NaN always wins); float64 gradient checks run on the GPU;
// running statistics after several training steps; zero-element inputs. Every variant must run at
// least the stated number of problems (a variant that declines everything fails). Runs only with a
// GPU (gpu_main.cpp reports the binary skipped otherwise).
#include <catch2/catch.hpp>

#include <algorithm>
#include <variant>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "engine/autograd/functions.h"
#include "engine/core/views.h"
#include "engine/dispatch/batch_norm_problem.h"
#include "engine/dispatch/pool_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/ops/batch_norm.h"
#include "engine/ops/pool.h"
#include "helpers/batch_norm_case.h"
#include "helpers/gradcheck.h"
#include "helpers/pool_options.h"
#include "helpers/variant_harness.h"
#include "kernels/register.h"
#include "models/registry.h"

using namespace anvil;
using anvil::test::gradcheck;
using anvil::test::uniform_leaf;

namespace {

const Device kGpu = Device::cuda(0);
const std::vector<std::string> kGpuVariants = {"cuda.custom", "cuda.cudnn"};
const std::vector<std::string> kModels = {"alexnet", "vgg16", "resnet50", "cnn_mnist", "cnn_cifar"};

Tensor gpu(const Tensor& t) { return raw::to_device(t, kGpu); }
Tensor cpu(const Tensor& t) { return raw::to_device(t, Device::cpu()); }
std::vector<double> vals(const Tensor& t) { return anvil::test::values_f64(cpu(t)); }

// Values on the CPU: U(-2, 2), or, with `ties`, multiples of 0.5 in [-2, 2] with a third of
// them 0 (ReLU outputs): many equal maxima per window.
Tensor data(const Shape& shape, std::uint64_t seed, bool ties, DType dtype) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& e : v) {
    e = u(rng);
    if (ties) e = e < -0.7 ? 0.0 : std::round(e * 2.0) / 2.0;
  }
  return raw::to_dtype(Tensor::from_vector(v, shape), dtype);
}

// max |gpu - ref| / max(1, max |ref|); NaN where only one side is NaN counts as infinite.
double scaled_error(const Tensor& got, const Tensor& want) {
  return anvil::test::scaled_error(got, want, /*nan_matches_nan=*/true);
}

// Bit-for-bit equality (as doubles; NaN equals NaN).
bool identical(const Tensor& got, const Tensor& want) {
  const auto g = vals(got), w = vals(want);
  if (g.size() != w.size()) return false;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (!(g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i])))) return false;
  return true;
}

Support support_of(const std::string& variant, const PoolProblem& p) {
  const auto* v = pool_table(p.kind).find(variant);
  REQUIRE(v != nullptr);
  return v->supports ? v->supports(p) : Support::yes();
}

// ---- pooling cases ------------------------------------------------------------------------------

struct PoolCase {
  std::string name;
  PoolProblem problem;  // on the CPU; moved to the GPU by the test
  bool model = false;   // a real layer problem of one of the CNNs
};

PoolProblem fixed(PoolKind kind, const Shape& x, std::array<std::int64_t, 2> k,
                  std::array<std::int64_t, 2> s, std::array<std::int64_t, 2> p, bool ceil,
                  bool include_pad) {
  return make_pool_problem(kind, x, k, s, p, ceil, include_pad, DType::f32, Device::cpu(), "test");
}

std::vector<PoolCase> pool_cases() {
  std::vector<PoolCase> c;
  for (bool include_pad : {true, false}) {
    const std::string pad = include_pad ? " include_pad" : " exclude_pad";
    for (PoolKind kind : {PoolKind::max, PoolKind::avg}) {
      if (kind == PoolKind::max && !include_pad) continue;
      const std::string k = kind == PoolKind::max ? "max" : "avg" + pad;
      c.push_back({k + " odd 3x3/2 pad 1 ceil",
                   fixed(kind, {2, 3, 7, 9}, {3, 3}, {2, 2}, {1, 1}, true, include_pad)});
      c.push_back({k + " 2x2/2 pad 1 ceil, last window dropped",
                   fixed(kind, {1, 2, 5, 5}, {2, 2}, {2, 2}, {1, 1}, true, include_pad)});
      c.push_back({k + " overlapping 3x3/1 pad 1",
                   fixed(kind, {2, 3, 6, 7}, {3, 3}, {1, 1}, {1, 1}, false, include_pad)});
      c.push_back({k + " rectangular 3x2/2x1 pad 1x0",
                   fixed(kind, {2, 2, 9, 7}, {3, 2}, {2, 1}, {1, 0}, false, include_pad)});
      c.push_back({k + " rectangular 3x2/2x1 pad 1x0 ceil",
                   fixed(kind, {2, 2, 9, 7}, {3, 2}, {2, 1}, {1, 0}, true, include_pad)});
      c.push_back({k + " window = input",
                   fixed(kind, {3, 5, 4, 4}, {4, 4}, {4, 4}, {0, 0}, false, include_pad)});
      c.push_back(
          {k + " 1x1", fixed(kind, {3, 2, 1, 1}, {1, 1}, {1, 1}, {0, 0}, false, include_pad)});
      // ceil_mode that adds a row and a column (cuda.cudnn declines it).
      c.push_back({k + " 2x2/2 ceil adds a row and a column",
                   fixed(kind, {1, 2, 7, 9}, {2, 2}, {2, 2}, {0, 0}, true, include_pad)});
    }
  }
  auto adaptive = [&](const std::string& name, const Shape& x, std::array<std::int64_t, 2> out) {
    c.push_back({name, make_adaptive_pool_problem(x, out, DType::f32, Device::cpu(), "test")});
  };
  adaptive("adaptive odd 7x9 -> 3x4", {2, 3, 7, 9}, {3, 4});
  adaptive("adaptive upsampling 2x3 -> 5x7", {1, 2, 2, 3}, {5, 7});
  adaptive("adaptive uniform 10x8 -> 5x4", {2, 3, 10, 8}, {5, 4});
  adaptive("global 5x6 -> 1x1", {2, 7, 5, 6}, {1, 1});
  // The real layer problems (batch 2), each distinct problem once.
  std::set<std::string> seen;
  for (const std::string& m : kModels)
    for (const auto& np : models::problems(m, 2)) {
      const auto* pool = std::get_if<PoolProblem>(&np.problem);
      if (!pool) continue;
      PoolProblem p = *pool;
      p.pass = PoolPass::forward_inference;
      if (!seen.insert(p.key()).second) continue;
      c.push_back({np.name, p, true});
    }
  return c;
}

}  // namespace

TEST_CASE("the GPU pooling and batch-norm variants are registered", "[cuda][pool][batch_norm]") {
  register_builtin_kernels();
  (void)gpu(Tensor::zeros({1}));  // loads the backend
  for (PoolKind kind : {PoolKind::max, PoolKind::avg, PoolKind::adaptive_avg})
    for (const std::string& v : kGpuVariants) {
      INFO(pool_op_name(kind) << " " << v);
      CHECK(pool_table(kind).find(v) != nullptr);
    }
  for (const std::string& v : kGpuVariants) CHECK(batch_norm2d_table().find(v) != nullptr);
}

TEST_CASE("every GPU pooling variant matches ref on every pass, f32 and f64",
          "[cuda][pool][variants]") {
  register_builtin_kernels();
  // ran[variant op pass] over all cases, and over the model layers alone.
  std::map<std::string, int> ran, ran_model;
  // Every GPU variant of each pooling table runs at least 4 problem-passes
  // (tests/helpers/variant_harness.h; the stated floors per pass follow); the CPU ref is the
  // oracle.
  std::map<PoolKind, std::unique_ptr<test::VariantHarness>> harness;
  for (PoolKind k : {PoolKind::max, PoolKind::avg, PoolKind::adaptive_avg})
    harness[k] = std::make_unique<test::VariantHarness>(pool_table(k), DeviceType::cuda, 4);
  std::uint64_t seed = 1000;
  const std::vector<PoolCase> cases = pool_cases();
  for (const PoolCase& c : cases)
    for (DType dt : {DType::f32, DType::f64}) {
      PoolProblem p = c.problem;
      p.dtype = dt;
      const bool is_max = p.kind == PoolKind::max;
      const std::string op = pool_op_name(p.kind);
      const Tensor x = data({p.n, p.c, p.h, p.w}, ++seed, is_max, dt);
      const Tensor dy = data({p.n, p.c, p.oh, p.ow}, ++seed, false, dt);
      ops::PoolForward ref_tr;
      Tensor y_ref, dx_ref;
      {
        ForceVariant force(op, "ref");
        y_ref = ops::pool2d_forward(x, p, false).y;
        ref_tr = ops::pool2d_forward(x, p, true);
        dx_ref = ops::pool2d_backward(dy, ref_tr);
      }
      PoolProblem pg = p;
      pg.device = kGpu;
      const Tensor xg = gpu(x), dyg = gpu(dy);
      auto count = [&](const std::string& v, PoolPass pass) {
        std::string key = v;
        key.append(" ").append(op).append(" ").append(pool_pass_name(pass));
        ++ran[key];
        if (c.model) ++ran_model[key];
      };
      const double tol = dt == DType::f64 ? 1e-12 : 1e-6;
      test::VariantHarness& h = *harness[p.kind];
      // Inference.
      h.run(pool_table(p.kind), pg.with_pass(PoolPass::forward_inference), c.name,
            [&](const PoolTable::Variant& var) {
              const std::string& v = var.name;
              const ops::PoolForward f = ops::pool2d_forward(xg, pg, false);
              std::string bad;
              if (f.variant != v) bad += "ran " + f.variant + " when forced; ";
              if (v == "cuda.custom" || is_max) {
                // Same order of the same operations / exact max.
                if (!identical(f.y, y_ref)) bad += "y differs from ref; ";
              } else {
                bad += test::compare_scaled("y", f.y, y_ref, tol, true);
              }
              count(v, PoolPass::forward_inference);
              return bad;
            });
      // Training forward and backward: a variant trains all or nothing of a problem.
      for (const auto& v : pool_table(p.kind).variants()) {
        if (v.device != DeviceType::cuda) continue;
        INFO(v.name << " on " << c.name << ": " << pg.repr());
        CHECK(support_of(v.name, pg.with_pass(PoolPass::forward_training)).ok ==
              support_of(v.name, pg.with_pass(PoolPass::backward)).ok);
      }
      const std::vector<std::pair<std::string, PoolProblem>> training = {
          {"forward_training", pg.with_pass(PoolPass::forward_training)},
          {"backward", pg.with_pass(PoolPass::backward)}};
      h.run(pool_table(p.kind), training, c.name, [&](const PoolTable::Variant& var) {
        const std::string& v = var.name;
        const ops::PoolForward f = ops::pool2d_forward(xg, pg, true);
        std::string bad;
        if (f.variant != v) bad += "ran " + f.variant + " when forced; ";
        const Tensor dx = ops::pool2d_backward(dyg, f);
        if (v == "cuda.custom") {
          if (!identical(f.y, ref_tr.y)) bad += "training y differs from ref; ";
          if (is_max) {  // the same index: first maximum in row-major window order
            if (f.workspace.dtype() != DType::i32)
              bad += "the max workspace is not i32; ";
            else if (!identical(f.workspace, ref_tr.workspace))
              bad += "the max indices differ from ref's; ";
          }
          // See Note [Gathered pool backward]
          if (!identical(dx, dx_ref)) bad += "dx differs from ref; ";
        } else {
          bad += test::compare_scaled("training y", f.y, ref_tr.y, tol, true);
          bad += test::compare_scaled("dx", dx, dx_ref, tol, true);
        }
        count(v, PoolPass::forward_training);
        count(v, PoolPass::backward);
        return bad;
      });
    }
  for (auto& [kind, h] : harness) h->finish();
  std::string summary;
  for (const auto& [k, n] : ran) summary += k + ": " + std::to_string(n) + "; ";
  WARN("problems run per variant and pass (f32 + f64): " << summary);
  // Stated floors. cuda.custom runs every case, every pass, both dtypes.
  const int n_max = static_cast<int>(std::count_if(
      cases.begin(), cases.end(), [](const auto& c) { return c.problem.kind == PoolKind::max; }));
  for (const char* pass : {"forward_inference", "forward_training", "backward"}) {
    CHECK(ran[std::string("cuda.custom max_pool2d ") + pass] == 2 * n_max);
    CHECK(ran[std::string("cuda.custom avg_pool2d ") + pass] >= 2 * 16);
    CHECK(ran[std::string("cuda.custom adaptive_avg_pool2d ") + pass] >= 2 * 4);
    // cuda.cudnn: the 14 average cases whose ceil mode keeps the floor size.
    CHECK(ran[std::string("cuda.cudnn avg_pool2d ") + pass] == 2 * 14);
  }
  // cuda.cudnn max: inference only (Note [cuDNN pooling refusals]), all but the size-changing
  // ceil case.
  CHECK(ran["cuda.cudnn max_pool2d forward_inference"] == 2 * (n_max - 1));
  CHECK(ran["cuda.cudnn max_pool2d forward_training"] == 0);
  CHECK(ran["cuda.cudnn adaptive_avg_pool2d forward_inference"] >= 2 * 2);
  // The models' layers at batch 2: 12 distinct max pools over the five CNNs and 2 adaptive
  // pools (resnet50's global average, vgg16's 7x7 -> 7x7), as
  // tests/test_cuda_pool_bn_plan.cpp counts them without a GPU.
  CHECK(ran_model["cuda.custom max_pool2d backward"] >= 2 * 12);
  CHECK(ran_model["cuda.cudnn max_pool2d forward_inference"] >= 2 * 12);
  CHECK(ran_model["cuda.custom adaptive_avg_pool2d backward"] >= 2 * 2);
  CHECK(ran_model["cuda.cudnn adaptive_avg_pool2d backward"] >= 2 * 2);
}

TEST_CASE("GPU max pooling keeps ref's tie and NaN rules", "[cuda][pool]") {
  register_builtin_kernels();
  // One 1x1x4x4 plane, 2x2 windows: all ties; NaN among numbers; all NaN; -inf with NaN; -inf.
  const double nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  const std::vector<double> v = {1,   1,   nan,  2,    //
                                 1,   1,   3,    nan,  //
                                 nan, nan, -inf, nan,  //
                                 nan, nan, -inf, -inf};
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor x = raw::to_dtype(Tensor::from_vector(v, {1, 1, 4, 4}), dt);
    const PoolProblem p = fixed(PoolKind::max, {1, 1, 4, 4}, {2, 2}, {2, 2}, {0, 0}, false, true);
    PoolProblem pc = p, pg = p;
    pc.dtype = pg.dtype = dt;
    pg.device = kGpu;
    ops::PoolForward ref;
    {
      ForceVariant force("max_pool2d", "ref");
      ref = ops::pool2d_forward(x, pc, true);
    }
    // ref: window 0 -> 1 at index 0 (the first of four ties); a NaN always wins, the last one in
    // window order (Note [NaN propagation]): window 1 -> NaN at 7, window 2 (all NaN) -> NaN at
    // 13, window 3 (-inf and one NaN) -> NaN at 11.
    const auto ry = vals(ref.y);
    CHECK(ry[0] == 1);
    CHECK((std::isnan(ry[1]) && std::isnan(ry[2]) && std::isnan(ry[3])));
    CHECK(vals(ref.workspace) == std::vector<double>{0, 7, 13, 11});
    {
      ForceVariant force("max_pool2d", "cuda.custom");
      const ops::PoolForward f = ops::pool2d_forward(gpu(x), pg, true);
      CHECK(identical(f.y, ref.y));
      CHECK(identical(f.workspace, ref.workspace));
      const Tensor dx = ops::pool2d_backward(gpu(Tensor::ones({1, 1, 2, 2}, dt)), f);
      CHECK(vals(dx) == std::vector<double>{1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0});
    }
    {
      // CUDNN_PROPAGATE_NAN: any NaN in a window gives NaN, as ref (its index is not kept:
      // cuda.cudnn max pooling runs at inference only).
      ForceVariant force("max_pool2d", "cuda.cudnn");
      const ops::PoolForward f = ops::pool2d_forward(gpu(x), pg, false);
      const auto y = vals(f.y);
      CHECK(y[0] == 1);
      CHECK((std::isnan(y[1]) && std::isnan(y[2]) && std::isnan(y[3])));
    }
  }
}

TEST_CASE("GPU pooling on zero-element inputs", "[cuda][pool][zero]") {
  register_builtin_kernels();
  const Tensor x = gpu(Tensor::zeros({0, 3, 4, 4}));
  for (const std::string& v : kGpuVariants) {
    INFO(v);
    ForceVariant f1("max_pool2d", v), f2("avg_pool2d", v), f3("adaptive_avg_pool2d", v);
    Pool2dOptions o;
    o.kernel = {2, 2};
    CHECK(anvil::max_pool2d(x, o).sizes() == Shape{0, 3, 2, 2});
    CHECK(anvil::avg_pool2d(x, o).sizes() == Shape{0, 3, 2, 2});
    CHECK(anvil::adaptive_avg_pool2d(x, {1, 1}).sizes() == Shape{0, 3, 1, 1});
    const PoolProblem p =
        ops::pool2d_problem(PoolKind::avg, x, {2, 2}, {2, 2}, {0, 0}, false, true, "test");
    const ops::PoolForward f = ops::pool2d_forward(x, p, true);
    CHECK(ops::pool2d_backward(gpu(Tensor::zeros({0, 3, 2, 2})), f).sizes() == Shape{0, 3, 4, 4});
  }
}

// ---- batch norm ---------------------------------------------------------------------------------

namespace {

struct BnCase {
  std::string name;
  Shape shape;
  bool model = false;
};

std::vector<BnCase> bn_cases() {
  std::vector<BnCase> c = {
      {"small odd", {2, 3, 5, 7}},
      {"one pixel per plane", {4, 5, 1, 1}},
      {"single image", {1, 6, 3, 3}},
      {"two values per channel", {2, 3, 1, 1}},
  };
  std::set<Shape> seen;
  for (const std::string& m : kModels)
    for (const auto& np : models::problems(m, 2)) {
      const auto* bn = std::get_if<BatchNormProblem>(&np.problem);
      if (!bn) continue;
      const BatchNormProblem& p = *bn;
      const Shape s{p.n, p.c, p.h, p.w};
      if (seen.insert(s).second) c.push_back({np.name, s, true});
    }
  return c;
}

Support bn_support(const std::string& variant, const BatchNormProblem& p) {
  const auto* v = batch_norm2d_table().find(variant);
  REQUIRE(v != nullptr);
  return v->supports ? v->supports(p) : Support::yes();
}

}  // namespace

TEST_CASE("every GPU batch-norm variant matches ref on every pass, f32 and f64",
          "[cuda][batch_norm][variants]") {
  register_builtin_kernels();
  std::map<std::string, int> ran, ran_model;
  std::uint64_t seed = 5000;
  const std::vector<BnCase> cases = bn_cases();
  // Every GPU variant runs every case in both dtypes, all three passes
  // (tests/helpers/variant_harness.h); the CPU ref is the oracle.
  test::VariantHarness harness(batch_norm2d_table(), DeviceType::cuda,
                               2 * static_cast<int>(cases.size()));
  for (const BnCase& c : cases)
    for (DType dt : {DType::f32, DType::f64}) {
      const std::int64_t C = c.shape[1];
      const Tensor x = data(c.shape, ++seed, false, dt), dy = data(c.shape, ++seed, false, dt);
      const Tensor w = raw::to_dtype(uniform_leaf({C}, 0.5, 1.5, ++seed, false), dt),
                   b = raw::to_dtype(uniform_leaf({C}, -1, 1, ++seed, false), dt),
                   rm0 = raw::to_dtype(uniform_leaf({C}, -0.5, 0.5, ++seed, false), dt),
                   rv0 = raw::to_dtype(uniform_leaf({C}, 0.5, 2, ++seed, false), dt);
      test::BnOutputs ref;
      {
        ForceVariant force("batch_norm2d", "ref");
        ref = anvil::test::batch_norm_passes(x, w, b, rm0, rv0, dy, Device::cpu(), true);
      }
      const BatchNormProblem p =
          make_batch_norm_problem(c.shape, true, 0.1, 1e-5, dt, kGpu, "test");
      // f32: cuDNN accumulates in f32 (ref in double); sums over up to 2*112*112 values.
      const double tol = dt == DType::f64 ? 1e-10 : 1e-4;
      const std::vector<std::pair<std::string, BatchNormProblem>> passes = {
          {"training", p},
          {"inference", p.with_pass(BatchNormPass::forward_inference)},
          {"backward", p.with_pass(BatchNormPass::backward)}};
      harness.run(batch_norm2d_table(), passes, c.name, [&](const BatchNormTable::Variant& var) {
        const std::string& v = var.name;
        const BatchNormProblem eval_bwd =
            p.with_pass(BatchNormPass::forward_inference).with_pass(BatchNormPass::backward);
        const Support es = bn_support(v, eval_bwd);
        std::string bad;
        if (!es.ok && es.reason.empty()) bad += "eval backward declined without a reason; ";
        const test::BnOutputs o =
            anvil::test::batch_norm_passes(x, w, b, rm0, rv0, dy, kGpu, es.ok);
        bad += test::compare_scaled("y", o.y, ref.y, tol) +
               test::compare_scaled("mean", o.mean, ref.mean, tol / 10) +
               // biased: cuDNN's unbiased * (M-1)/M
               test::compare_scaled("var", o.var, ref.var, tol) +
               test::compare_scaled("running mean", o.rm, ref.rm, tol / 10) +
               // PyTorch's momentum, unbiased variance
               test::compare_scaled("running var", o.rv, ref.rv, tol) +
               test::compare_scaled("dx", o.dx, ref.dx, tol * 10) +
               test::compare_scaled("dw", o.dw, ref.dw, tol * 10) +
               test::compare_scaled("db", o.db, ref.db, tol) +
               test::compare_scaled("eval y", o.y_eval, ref.y_eval, tol);
        ++ran[v + " training+backward"];
        ++ran[v + " inference"];
        if (c.model) ++ran_model[v];
        if (es.ok) {
          bad += test::compare_scaled("eval dx", o.dx_eval, ref.dx_eval, tol) +
                 test::compare_scaled("eval dw", o.dw_eval, ref.dw_eval, tol * 10) +
                 test::compare_scaled("eval db", o.db_eval, ref.db_eval, tol);
          ++ran[v + " eval backward"];
        }
        return bad;
      });
    }
  harness.finish();
  std::string summary;
  for (const auto& [k, n] : ran) summary += k + ": " + std::to_string(n) + "; ";
  WARN("batch-norm problems run (f32 + f64): " << summary);
  const int n = static_cast<int>(cases.size());
  for (const std::string& v : kGpuVariants) {
    CHECK(ran[v + " training+backward"] == 2 * n);
    CHECK(ran[v + " inference"] == 2 * n);
    CHECK(ran_model[v] >= 2 * 12);  // resnet50's 12 distinct batch-norm shapes at batch 2
  }
  CHECK(ran["cuda.custom eval backward"] == 2 * n);
  CHECK(ran["cuda.cudnn eval backward"] == 0);  // declined (Note [cuDNN batch norm])
}

TEST_CASE("GPU running statistics after training steps equal the CPU's", "[cuda][batch_norm]") {
  register_builtin_kernels();
  // Five training steps (momentum 0.1, different batches), then the running statistics of the
  // CPU (ref) and of each GPU variant; stated tolerance: 1e-5 relative in f32, 1e-12 in f64.
  const Shape shape{4, 8, 6, 5};
  for (DType dt : {DType::f32, DType::f64}) {
    auto steps = [&](const std::string& variant, Device dev) {
      ForceVariant force("batch_norm2d", variant);
      Tensor rm = raw::to_device(Tensor::zeros({8}, dt), dev),
             rv = raw::to_device(Tensor::ones({8}, dt), dev);
      for (int s = 0; s < 5; ++s) {  // batches U(-1, 3 + s): the variance grows
        const Tensor x =
            raw::to_device(raw::to_dtype(uniform_leaf(shape, -1, 3 + s, 700 + s, false), dt), dev);
        (void)ops::batch_norm2d_forward(x, Tensor(), Tensor(), rm, rv, true, 0.1, 1e-5);
      }
      return std::make_pair(rm, rv);
    };
    const auto [rm_ref, rv_ref] = steps("ref", Device::cpu());
    const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
    for (const std::string& v : kGpuVariants) {
      INFO(v << " " << dtype_name(dt));
      const auto [rm, rv] = steps(v, kGpu);
      CHECK(scaled_error(rm, rm_ref) <= tol);
      CHECK(scaled_error(rv, rv_ref) <= tol);
      // The tolerance separates the conventions: with the biased variance (factor 1 instead of
      // M / (M - 1) = 120 / 119) the running variance would be about 0.3 % lower after 5 steps.
    }
  }
}

TEST_CASE("GPU batch norm on zero-element inputs", "[cuda][batch_norm][zero]") {
  register_builtin_kernels();
  for (const std::string& v : kGpuVariants) {
    INFO(v);
    ForceVariant force("batch_norm2d", v);
    const Tensor x = gpu(Tensor::zeros({0, 3, 4, 4}));
    const Tensor rm = gpu(Tensor::zeros({3})), rv = gpu(Tensor::ones({3}));
    const auto f = ops::batch_norm2d_forward(x, Tensor(), Tensor(), rm, rv, false, 0.1, 1e-5);
    CHECK(f.y.sizes() == x.sizes());
    CHECK(ops::batch_norm2d_backward(x, x, Tensor(), f).dx.sizes() == x.sizes());
  }
}

// ---- float64 gradient checks through the GPU kernels
// ---------------------------------------------

namespace {

// Runs body for each GPU variant that supports every pass of `p` (the others are listed).
template <typename Table, typename Problem, typename Body>
int for_gpu_variants(Table& table, const std::vector<Problem>& passes, Body&& body) {
  int n = 0;
  for (const std::string& v : kGpuVariants) {
    const auto* var = table.find(v);
    REQUIRE(var != nullptr);
    bool ok = true;
    for (const Problem& q : passes)
      if (var->supports && !var->supports(q).ok) ok = false;
    if (!ok) continue;
    ForceVariant force(table.op(), v);
    INFO("variant " << v);
    body();
    ++n;
  }
  return n;
}

std::vector<PoolProblem> all_pool_passes(const PoolProblem& p) {
  return {p.with_pass(PoolPass::forward_training), p.with_pass(PoolPass::backward)};
}

}  // namespace

TEST_CASE("float64 gradient checks of pooling on the GPU", "[cuda][pool][gradcheck]") {
  register_builtin_kernels();
  (void)gpu(Tensor::zeros({1}));
  std::map<std::string, int> checked;
  auto on_gpu = [](auto f) {
    return [f](const std::vector<Tensor>& in) { return f(in[0].to(kGpu)).to(Device::cpu()); };
  };
  for (const Pool2dOptions& o :
       {test::pool_options(3, 2, 1, true, true), test::pool_options(2, 2, 0, false, true)}) {
    const Shape shape{2, 2, 7, 9};
    PoolProblem p = make_pool_problem(PoolKind::max, shape, o.kernel, o.stride, o.padding,
                                      o.ceil_mode, true, DType::f64, kGpu, "test");
    checked["max"] += for_gpu_variants(max_pool2d_table(), all_pool_passes(p), [&] {
      const Tensor x = anvil::test::distinct_leaf(shape, 0.01, 11);
      ANVIL_CHECK_GRADCHECK("max_pool2d on cuda",
                            on_gpu([o](const Tensor& t) { return anvil::max_pool2d(t, o); }), {x});
    });
  }
  for (bool include_pad : {true, false})
    for (const Pool2dOptions& o : {test::pool_options(3, 2, 1, true, include_pad),
                                   test::pool_options(3, 1, 1, false, include_pad)}) {
      const Shape shape{2, 2, 7, 6};
      PoolProblem p = make_pool_problem(PoolKind::avg, shape, o.kernel, o.stride, o.padding,
                                        o.ceil_mode, include_pad, DType::f64, kGpu, "test");
      checked["avg"] += for_gpu_variants(avg_pool2d_table(), all_pool_passes(p), [&] {
        const Tensor x = uniform_leaf(shape, -1, 1, 5);
        ANVIL_CHECK_GRADCHECK("avg_pool2d on cuda",
                              on_gpu([o](const Tensor& t) { return anvil::avg_pool2d(t, o); }),
                              {x});
      });
    }
  // Named variables, not a structured binding: clang 14 (clang-tidy) cannot capture a binding.
  for (const auto& c : {std::pair<Shape, std::array<std::int64_t, 2>>{{2, 2, 7, 9}, {3, 4}},
                        {{1, 3, 6, 4}, {3, 2}},
                        {{2, 3, 5, 5}, {1, 1}}}) {
    const Shape& shape = c.first;
    const std::array<std::int64_t, 2>& out = c.second;
    PoolProblem p = make_adaptive_pool_problem(shape, out, DType::f64, kGpu, "test");
    checked["adaptive"] += for_gpu_variants(adaptive_avg_pool2d_table(), all_pool_passes(p), [&] {
      const Tensor x = uniform_leaf(shape, -1, 1, 6);
      ANVIL_CHECK_GRADCHECK(
          "adaptive_avg_pool2d on cuda",
          on_gpu([out = out](const Tensor& t) { return anvil::adaptive_avg_pool2d(t, out); }), {x});
    });
  }
  // cuda.custom everywhere; cuda.cudnn on the averages whose ceil mode keeps the size (2) and
  // the uniform adaptive bins (6x4 -> 3x2 and the global 5x5 -> 1x1).
  CHECK(checked["max"] == 2);
  CHECK(checked["avg"] == 4 + 2);
  CHECK(checked["adaptive"] == 3 + 2);
}

TEST_CASE("float64 gradient checks of batch norm on the GPU", "[cuda][batch_norm][gradcheck]") {
  register_builtin_kernels();
  (void)gpu(Tensor::zeros({1}));
  const Shape shape{3, 4, 3, 5};
  int checked = 0;
  for (bool training : {true, false}) {
    const BatchNormProblem p =
        make_batch_norm_problem(shape, training, 0.1, 1e-5, DType::f64, kGpu, "test");
    checked += for_gpu_variants(
        batch_norm2d_table(),
        std::vector<BatchNormProblem>{p, p.with_pass(BatchNormPass::backward)}, [&] {
          const Tensor x = uniform_leaf(shape, -2, 3, 21), w = uniform_leaf({4}, 0.5, 1.5, 22),
                       b = uniform_leaf({4}, -1, 1, 23);
          const Tensor rm = uniform_leaf({4}, -0.5, 0.5, 24, false),
                       rv = uniform_leaf({4}, 0.5, 2.0, 25, false);
          ANVIL_CHECK_GRADCHECK("batch_norm2d on cuda",
                                [&](const std::vector<Tensor>& in) {
                                  // Fresh running statistics each call (deterministic function).
                                  return anvil::batch_norm2d(in[0].to(kGpu), in[1].to(kGpu),
                                                             in[2].to(kGpu), rm.to(kGpu).clone(),
                                                             rv.to(kGpu).clone(), training, 0.1,
                                                             1e-5)
                                      .to(Device::cpu());
                                },
                                {x, w, b});
        });
  }
  CHECK(checked == 2 + 1);  // both variants in training; eval: cuda.custom only
}
