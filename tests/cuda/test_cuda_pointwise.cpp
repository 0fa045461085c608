// SPDX-License-Identifier: Apache-2.0
// The custom CUDA pointwise family against the CPU on the same inputs: strided copies and fills
// (every dtype pair, transposed / sliced / broadcast sources, strided destinations), every
// EwOp (dense, broadcast, transposed, sliced, odd sizes, integer dtypes), reductions over every
// dim combination, softmax / log-softmax / cross-entropy forward and backward, and a float64
// gradient check of a small MLP-like composition run on CUDA. Runs only with a GPU
// (gpu_main.cpp reports the binary skipped otherwise).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "engine/autograd/functions.h"
#include "engine/core/cuda_backend.h"
#include "engine/core/views.h"
#include "engine/dispatch/elementwise_problem.h"
#include "engine/dispatch/reduce_problem.h"
#include "engine/dispatch/softmax_problem.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"
#include "helpers/gradcheck.h"
#include "helpers/op_problems.h"
#include "helpers/variant_harness.h"
#include "kernels/register.h"

using namespace anvil;
using anvil::test::gradcheck;
using anvil::test::uniform_leaf;
using Catch::Matchers::Contains;

namespace {
const Device kGpu = Device::cuda(0);

Tensor gpu(const Tensor& t) { return raw::to_device(t, kGpu); }
// Row-major values of any tensor (any device, any strides) as doubles.
std::vector<double> vals(const Tensor& t) {
  return anvil::test::values_f64(raw::to_device(t, Device::cpu()));
}
// U(low, high) values of `dtype` on the CPU (integers: truncated).
Tensor rnd(const Shape& shape, double low, double high, std::uint64_t seed,
           DType dtype = DType::f32) {
  return raw::to_dtype(uniform_leaf(shape, low, high, seed, false), dtype);
}

// "" when |gpu - cpu| <= atol + rtol * |cpu| everywhere (NaN only where both are NaN), else
// the worst element.
std::string close_message(const Tensor& on_gpu, const Tensor& on_cpu, const std::string& what,
                          double rtol = 1e-5, double atol = 1e-6) {
  if (on_gpu.device() != kGpu) return what + ": the result is not on the GPU; ";
  if (!on_cpu.device().is_cpu()) return what + ": the expected value is not on the CPU; ";
  if (on_gpu.sizes() != on_cpu.sizes())
    return what + ": shape " + shape_str(on_gpu.sizes()) + ", expected " +
           shape_str(on_cpu.sizes()) + "; ";
  if (on_gpu.dtype() != on_cpu.dtype())
    return what + ": dtype " + std::string(dtype_name(on_gpu.dtype())) + ", expected " +
           std::string(dtype_name(on_cpu.dtype())) + "; ";
  const auto g = vals(on_gpu), c = vals(on_cpu);
  std::size_t worst = 0;
  double worst_ratio = 0.0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(c[i])) continue;
    if (g[i] == c[i]) continue;  // also equal infinities
    const double r = std::fabs(g[i] - c[i]) / (atol + rtol * std::fabs(c[i]));
    if (!(r <= worst_ratio)) {
      worst_ratio = r;
      worst = i;
    }
  }
  if (worst_ratio <= 1.0) return {};
  std::ostringstream os;
  os << what << ": worst element " << worst << ": gpu " << g[worst] << " cpu " << c[worst]
     << " (|diff| / (atol + rtol |cpu|) = " << worst_ratio << "); ";
  return os.str();
}

void check_close(const Tensor& on_gpu, const Tensor& on_cpu, const std::string& what,
                 double rtol = 1e-5, double atol = 1e-6) {
  const std::string bad = close_message(on_gpu, on_cpu, what, rtol, atol);
  INFO(bad);
  CHECK(bad.empty());
}

// fn(device) -> outputs, on every CUDA variant of `table` (forced by the harness,
// tests/helpers/variant_harness.h) against fn(cpu) under `ref`. `problem` is fn's main table
// problem on the GPU (tests/helpers/op_problems.h).
template <typename Problem, typename Args, typename Fn>
void gpu_against_ref(test::VariantHarness& harness, const VariantTable<Problem, Args>& table,
                     const Problem& problem, Fn&& fn, const std::string& what, double rtol = 1e-5,
                     double atol = 1e-6) {
  std::vector<Tensor> want;
  {
    ForceVariant force(table.op(), "ref");
    want = fn(Device::cpu());
  }
  harness.run(table, problem, what, [&](const typename VariantTable<Problem, Args>::Variant&) {
    const std::vector<Tensor> got = fn(kGpu);
    if (got.size() != want.size()) return std::string("wrong number of outputs");
    std::string bad;
    for (std::size_t i = 0; i < got.size(); ++i)
      bad += close_message(got[i], want[i], "output " + std::to_string(i), rtol, atol);
    return bad;
  });
}

// A copy of t on d (t itself when it is there).
Tensor on(const Tensor& t, Device d) { return t.device() == d ? t : raw::to_device(t, d); }

std::vector<DType> all_dtypes() { return {DType::f32, DType::f64, DType::i32, DType::i64}; }
}  // namespace

TEST_CASE("the CUDA pointwise variants are registered", "[cuda][pointwise]") {
  register_builtin_kernels();
  (void)gpu(Tensor::zeros({1}));  // loads the backend
  CHECK(elementwise_table().find("cuda.custom.elementwise") != nullptr);
  CHECK(reduce_table().find("cuda.custom.reduce") != nullptr);
  CHECK(softmax_table().find("cuda.custom.softmax") != nullptr);
  // Forcing a CPU variant for a CUDA problem is an error that says why.
  ForceVariant force("reduce", "cpu.omp");
  CHECK_THROWS_WITH(ops::sum(gpu(Tensor::ones({3, 4}))), Contains("runs on cpu"));
}

// ---- copies and fills --------------------------------------------------------------------------

TEST_CASE("device copies convert every dtype pair through any strides", "[cuda][copy]") {
  // Small integers convert exactly between all four dtypes.
  const Tensor base = rnd({6, 10}, -50, 50, 1, DType::i64);
  for (DType sd : all_dtypes())
    for (DType dd : all_dtypes()) {
      const std::string pair = std::string(dtype_name(sd)) + " -> " + std::string(dtype_name(dd));
      const Tensor src_cpu = raw::to_dtype(base, sd);
      const Tensor src = gpu(src_cpu);
      struct Case {
        const char* name;
        Tensor g, c;
      };
      const std::vector<Case> cases = {
          {"dense", src, src_cpu},
          {"transposed", src.t(), src_cpu.t()},
          {"sliced step 3", src.slice(1, 1, 10, 3), src_cpu.slice(1, 1, 10, 3)},
          {"row broadcast", src.select(0, 2).unsqueeze(0).expand({5, 10}),
           src_cpu.select(0, 2).unsqueeze(0).expand({5, 10})},
          {"column broadcast", src.select(1, 4).unsqueeze(1).expand({6, 7}),
           src_cpu.select(1, 4).unsqueeze(1).expand({6, 7})},
      };
      for (const auto& k : cases) {
        Tensor dst = Tensor::empty(k.g.sizes(), dd, kGpu);
        dst.copy_(k.g);
        Tensor expect = Tensor::empty(k.c.sizes(), dd);
        expect.copy_(k.c);
        check_close(dst, expect, pair + " " + k.name, 0, 0);
      }
      // Into a strided CUDA destination: a transposed view and every other column of a bigger
      // buffer; the elements outside the view keep their values.
      Tensor big = Tensor::full({10, 12}, 7, dd, kGpu);
      Tensor view = big.slice(1, 0, 12, 2).t();  // [6, 10], strides (2, 12)
      view.copy_(src);
      Tensor big_cpu = Tensor::full({10, 12}, 7, dd);
      big_cpu.slice(1, 0, 12, 2).t().copy_(src_cpu);
      check_close(big, big_cpu, pair + " strided destination", 0, 0);
    }
  // From the host into a strided CUDA destination (staged, then scattered).
  Tensor big = Tensor::zeros({4, 6}, DType::f32, kGpu);
  big.t().copy_(rnd({6, 4}, -1, 1, 2));
  Tensor big_cpu = Tensor::zeros({4, 6});
  big_cpu.t().copy_(rnd({6, 4}, -1, 1, 2));
  check_close(big, big_cpu, "host -> strided device", 0, 0);
}

TEST_CASE("device copies of large and high-rank tensors", "[cuda][copy]") {
  // Odd sizes above one grid of blocks, 8 non-mergeable dims, and a 3-D permute.
  const Tensor a_cpu = rnd({1000003}, -1, 1, 3);
  Tensor a = gpu(a_cpu);
  Tensor d = Tensor::empty({1000003}, DType::f64, kGpu);
  d.copy_(a);
  check_close(d, raw::to_dtype(a_cpu, DType::f64), "1000003 f32 -> f64", 0, 0);
  const Tensor h_cpu = rnd({2, 3, 2, 3, 2, 3, 2, 3}, -1, 1, 4);
  const Shape order = {7, 0, 6, 1, 5, 2, 4, 3};
  check_close(gpu(h_cpu).permute(order).contiguous(), h_cpu.permute(order).contiguous(),
              "8-D permute", 0, 0);
  const Tensor p_cpu = rnd({37, 129, 65}, -1, 1, 5);
  check_close(gpu(p_cpu).permute({2, 0, 1}).contiguous(), p_cpu.permute({2, 0, 1}).contiguous(),
              "3-D permute", 0, 0);
}

TEST_CASE("device fills reach exactly the view's elements", "[cuda][copy]") {
  for (DType dt : all_dtypes()) {
    INFO(dtype_name(dt));
    Tensor g = Tensor::full({5, 9}, 1, dt, kGpu);
    Tensor c = Tensor::full({5, 9}, 1, dt);
    g.slice(1, 1, 9, 3).fill_(2.75);
    c.slice(1, 1, 9, 3).fill_(2.75);
    g.select(0, 3).fill_(-4);
    c.select(0, 3).fill_(-4);
    check_close(g, c, "strided fills", 0, 0);
    Tensor z = Tensor::full({1001}, 3, dt, kGpu);
    z.fill_(0.0);  // memset path
    check_close(z, Tensor::zeros({1001}, dt), "zero fill", 0, 0);
  }
  Tensor nz = Tensor::full({3}, -0.0, DType::f32, kGpu);
  CHECK(std::signbit(nz.select(0, 1).item()));
  CHECK(Tensor::full({}, 1.5, DType::f64, kGpu).item() == 1.5);
}

// ---- elementwise
// ---------------------------------------------------------------------------------

namespace {
struct EwCase {
  EwOp op;
  double low, high;
};  // input domain
const std::vector<EwCase>& ew_cases() {
  static const std::vector<EwCase> c = {
      {EwOp::neg, -2, 2},
      {EwOp::exp, -3, 3},
      {EwOp::log, 0.1, 4},
      {EwOp::sqrt, 0.1, 4},
      {EwOp::sigmoid, -6, 6},
      {EwOp::tanh, -3, 3},
      {EwOp::relu, -2, 2},
      {EwOp::abs, -2, 2},
      {EwOp::sign, -2, 2},
      {EwOp::add, -2, 2},
      {EwOp::sub, -2, 2},
      {EwOp::mul, -2, 2},
      {EwOp::div, 0.5, 3},
      {EwOp::pow, 0.2, 2},
      {EwOp::maximum, -2, 2},
      {EwOp::gt, -2, 2},
      {EwOp::add_scalar, -2, 2},
      {EwOp::mul_scalar, -2, 2},
      {EwOp::pow_scalar, 0.2, 3},
      {EwOp::rsub_scalar, -2, 2},
      {EwOp::rdiv_scalar, 0.5, 3},
      {EwOp::sigmoid_backward, 0, 1},
      {EwOp::tanh_backward, -1, 1},
      {EwOp::relu_backward, -2, 2},
      {EwOp::pow_scalar_backward, 0.2, 3},
  };
  return c;
}

// op on (a, b) on every CUDA variant against ref on the CPU; a and b are dense CPU tensors, given
// the same layout on both devices by `layout`.
template <typename Layout>
void compare_ew(test::VariantHarness& harness, EwOp op, const Tensor& a_dense,
                const Tensor& b_dense, Layout&& layout, const std::string& what, double rtol = 2e-6,
                double atol = 1e-6) {
  const double s = 1.75, alpha = 0.5;
  const bool unary = ew_arity(op) == 1;
  const Tensor ag = layout(gpu(a_dense)), bg = layout(gpu(b_dense));
  gpu_against_ref(
      harness, elementwise_table(), test::elementwise_problem_of(op, ag, unary ? nullptr : &bg),
      [&](Device d) {
        const Tensor x = layout(on(a_dense, d)), y = layout(on(b_dense, d));
        return std::vector<Tensor>{unary ? ops::unary(op, x, s) : ops::binary(op, x, y, alpha, s)};
      },
      std::string(ew_name(op)) + " " + what, rtol, atol);
}
}  // namespace

TEST_CASE("every EwOp on CUDA matches the CPU across layouts", "[cuda][elementwise]") {
  register_builtin_kernels();
  (void)gpu(Tensor::zeros({1}));  // loads the backend (its variants)
  // Every CUDA elementwise variant runs every problem, against ref on the CPU.
  test::VariantHarness harness(elementwise_table(), DeviceType::cuda, 1);
  harness.require_all();
  const auto same = [](const Tensor& t) { return t; };
  for (const auto& k : ew_cases()) {
    for (DType dt : {DType::f32, DType::f64}) {
      const std::string tag = std::string(dtype_name(dt));
      const Tensor a = rnd({37, 53}, k.low, k.high, 10 + static_cast<int>(k.op), dt);
      const Tensor b =
          rnd({37, 53}, k.op == EwOp::pow ? -1.5 : k.low, k.high, 50 + static_cast<int>(k.op), dt);
      compare_ew(harness, k.op, a, b, same, tag + " dense");
      compare_ew(
          harness, k.op, a, b, [](const Tensor& t) { return t.t(); }, tag + " transposed");
      compare_ew(
          harness, k.op, a, b,
          [](const Tensor& t) { return t.slice(0, 1, 37, 2).slice(1, 3, 50, 3); }, tag + " sliced");
      if (ew_arity(k.op) == 2) {
        // Broadcasting: a row of b against all of a, a column of a against b, a 0-D b.
        compare_ew(harness, k.op, a, b.select(0, 0).unsqueeze(0), same, tag + " row broadcast");
        compare_ew(harness, k.op, a.select(1, 0).unsqueeze(1), b, same, tag + " column broadcast");
        compare_ew(harness, k.op, a, b.select(0, 3).select(0, 7), same, tag + " 0-D operand");
      }
    }
    // An odd size, dense.
    const Tensor odd_a = rnd({1060921}, k.low, k.high, 7);
    const Tensor odd_b = rnd({1060921}, k.op == EwOp::pow ? -1.5 : k.low, k.high, 8);
    compare_ew(harness, k.op, odd_a, odd_b, same, "odd size");
  }
  harness.finish();
}

TEST_CASE("elementwise and copy kernels cover more elements than one grid", "[cuda][elementwise]") {
  // 65536 blocks * 256 threads + an odd tail: the grid-stride loops must reach the end, dense
  // and strided (a transposed operand).
  const std::int64_t n = 65536LL * 256 + 12345;
  const Tensor a = rnd({n}, -1, 1, 110), b = rnd({n}, -1, 1, 111);
  check_close(ops::binary(EwOp::add, gpu(a), gpu(b), 0.5), ops::binary(EwOp::add, a, b, 0.5),
              "dense add", 1e-6, 1e-7);
  const std::int64_t rows = 4099, cols = n / rows;  // 4099 * 4096 elements, viewed transposed
  const Tensor m = a.slice(0, 0, rows * cols).reshape({rows, cols});
  check_close(ops::unary(EwOp::neg, gpu(m).t()), ops::unary(EwOp::neg, m.t()), "strided neg", 0, 0);
  check_close(gpu(m).t().contiguous(), m.t().contiguous(), "strided copy", 0, 0);
}

TEST_CASE("integer elementwise ops and in-place updates on CUDA", "[cuda][elementwise]") {
  for (DType dt : {DType::i32, DType::i64}) {
    INFO(dtype_name(dt));
    const Tensor a = rnd({9, 11}, -20, 20, 21, dt), b = rnd({9, 11}, -20, 20, 22, dt);
    for (EwOp op : {EwOp::neg, EwOp::abs, EwOp::sign, EwOp::add, EwOp::sub, EwOp::mul,
                    EwOp::maximum, EwOp::gt, EwOp::add_scalar, EwOp::mul_scalar}) {
      // alpha 2 and scalar 3 are exact in every dtype.
      if (ew_arity(op) == 1)
        check_close(ops::unary(op, gpu(a), 3.0), ops::unary(op, a, 3.0), ew_name(op), 0, 0);
      else
        check_close(ops::binary(op, gpu(a).t(), gpu(b).t(), 2.0),
                    ops::binary(op, a.t(), b.t(), 2.0), ew_name(op), 0, 0);
    }
    CHECK_THROWS_WITH(ops::unary(EwOp::exp, gpu(a)), Contains("floating-point"));
  }
  // In place: dst += alpha * broadcast src.
  Tensor dc = rnd({8, 5}, -1, 1, 30), sc = rnd({5}, -1, 1, 31);
  Tensor dg = gpu(dc);
  ops::add_(dg, gpu(sc), -0.25);
  ops::add_(dc, sc, -0.25);
  check_close(dg, dc, "add_ broadcast");
  ops::mul_scalar_(dg.t(), 3.0);
  ops::mul_scalar_(dc.t(), 3.0);
  check_close(dg, dc, "mul_scalar_ transposed");
}

TEST_CASE("arithmetic-only EwOps on CUDA equal the CPU bit for bit", "[cuda][elementwise]") {
  // No libm here: IEEE operations in the CPU functors' order, so any difference is a bug.
  // alpha and s are not powers of two: a product fused with the following add/sub into one
  // FMA (nvcc's default contraction; elementwise_kernels.cu rounds alpha * b and a * a on their
  // own, mul_rn) would round differently from the CPU in some elements.
  const double alpha = 0.3, s = 1.7;
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor a = rnd({37, 53}, -2, 2, 120, dt), b = rnd({37, 53}, -2, 2, 121, dt);
    const std::string tag = std::string(" ").append(dtype_name(dt));
    for (EwOp op : {EwOp::add, EwOp::sub, EwOp::mul, EwOp::div, EwOp::maximum,
                    EwOp::sigmoid_backward, EwOp::tanh_backward, EwOp::relu_backward}) {
      check_close(ops::binary(op, gpu(a), gpu(b), alpha, s), ops::binary(op, a, b, alpha, s),
                  ew_name(op) + tag + " dense", 0, 0);
      check_close(ops::binary(op, gpu(a).t(), gpu(b).t(), alpha, s),
                  ops::binary(op, a.t(), b.t(), alpha, s), ew_name(op) + tag + " transposed", 0, 0);
    }
    for (EwOp op : {EwOp::neg, EwOp::abs, EwOp::relu, EwOp::add_scalar, EwOp::mul_scalar,
                    EwOp::rsub_scalar, EwOp::rdiv_scalar})
      check_close(ops::unary(op, gpu(a), s), ops::unary(op, a, s), ew_name(op) + tag, 0, 0);
  }
}

// ---- reductions
// ----------------------------------------------------------------------------------

TEST_CASE("sum, mean and max over every dim combination match the CPU", "[cuda][reduce]") {
  register_builtin_kernels();
  (void)gpu(Tensor::zeros({1}));  // loads the backend (its variants)
  // Every CUDA reduce variant runs every problem, against ref on the CPU.
  test::VariantHarness harness(reduce_table(), DeviceType::cuda, 1);
  harness.require_all();
  for (const Shape& shape : {Shape{4, 5, 6}, Shape{3, 1, 7, 2}, Shape{2, 33, 65}}) {
    const Tensor x = rnd(shape, -1, 1, 40);
    const Tensor xg = gpu(x);
    const auto nd = static_cast<std::int64_t>(shape.size());
    for (std::int64_t mask = 0; mask < (1 << nd); ++mask) {
      std::vector<std::int64_t> dims;
      for (std::int64_t d = 0; d < nd; ++d)
        if (mask & (1 << d)) dims.push_back(d);
      const std::string what = shape_str(shape) + " mask " + std::to_string(mask);
      gpu_against_ref(
          harness, reduce_table(), test::reduce_problem_of(ReduceOp::sum, xg),
          [&](Device d) {
            const Tensor xd = on(x, d);
            return std::vector<Tensor>{ops::sum(xd, dims, false), ops::sum(xd, dims, true),
                                       ops::mean(xd, dims, false), ops::mean(xd, dims, true)};
          },
          "sum and mean " + what);
    }
    for (std::int64_t d = 0; d < nd; ++d)
      gpu_against_ref(
          harness, reduce_table(), test::reduce_problem_of(ReduceOp::max, xg),
          [&](Device dev) {
            auto [v, i] = ops::max(on(x, dev), d, false);
            return std::vector<Tensor>{v, i};
          },
          "max values and indices dim " + std::to_string(d), 0, 0);
  }
  harness.finish();
  // The shapes sum_to produces in backward: bias gradients of [B, N] and [N, K, H, W].
  const Tensor g2 = rnd({64, 10}, -1, 1, 41);
  check_close(ops::sum_to(gpu(g2), {10}), ops::sum_to(g2, {10}), "sum_to [64,10] -> [10]");
  check_close(ops::sum_to(gpu(g2), {64, 1}), ops::sum_to(g2, {64, 1}), "sum_to -> [64,1]");
  const Tensor g4 = rnd({4, 6, 5, 7}, -1, 1, 42);
  check_close(ops::sum_to(gpu(g4), {6, 1, 1}), ops::sum_to(g4, {6, 1, 1}), "sum_to -> [6,1,1]");
  check_close(ops::sum_to(gpu(g4), {1, 5, 1}), ops::sum_to(g4, {1, 5, 1}), "sum_to -> [1,5,1]");
  // Long rows (block per row), tall columns (32 x 32 blocks), many tiles (32 x 8 blocks).
  for (const Shape& shape :
       {Shape{3, 5000}, Shape{100000, 3}, Shape{2, 3000, 40}, Shape{7, 300, 2000}}) {
    const Tensor x = rnd(shape, -1, 1, 43);
    for (std::int64_t d = 0; d < static_cast<std::int64_t>(shape.size()); ++d) {
      const std::string what = shape_str(shape) + " dim " + std::to_string(d);
      check_close(ops::sum(gpu(x), {d}), ops::sum(x, {d}), "sum " + what, 1e-5, 1e-5);
      auto [vg, ig] = ops::max(gpu(x), d);
      auto [vc, ic] = ops::max(x, d);
      check_close(vg, vc, "max " + what, 0, 0);
      check_close(ig, ic, "argmax " + what, 0, 0);
    }
  }
}

// Note [NaN propagation] (kernels/cpu/elementwise_functors.h): relu, its backward and maximum
// keep NaN on CUDA as on the CPU (checked there by tests/test_nan_propagation.cpp).
TEST_CASE("relu, relu_backward and maximum on CUDA propagate NaN as the CPU does",
          "[cuda][elementwise]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = Tensor::from_vector(std::vector<float>{nan, -1, 0, -0.0f, 2, nan, 3, -2}, {8});
  const Tensor b = Tensor::from_vector(std::vector<float>{1, nan, -5, 4, nan, nan, 1, -3}, {8});
  const Tensor dy = Tensor::full({8}, 2.0);
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor xc = raw::to_dtype(x, dt), bc = raw::to_dtype(b, dt), dyc = raw::to_dtype(dy, dt);
    const Tensor y_gpu = ops::unary(EwOp::relu, gpu(xc));
    const auto y = vals(y_gpu);
    CHECK(std::isnan(y[0]));
    CHECK(std::isnan(y[5]));
    CHECK(y[1] == 0);
    CHECK(y[4] == 2);
    check_close(y_gpu, ops::unary(EwOp::relu, xc), "relu", 0, 0);
    // The gradient passes where the output is NaN (PyTorch's threshold_backward on the output).
    const Tensor g_gpu = ops::binary(EwOp::relu_backward, y_gpu, gpu(dyc));
    CHECK(vals(g_gpu) == std::vector<double>{2, 0, 0, 0, 2, 2, 2, 0});
    const Tensor m_gpu = ops::binary(EwOp::maximum, gpu(xc), gpu(bc));
    const auto m = vals(m_gpu);
    for (int i : {0, 1, 4, 5}) CHECK(std::isnan(m[static_cast<std::size_t>(i)]));
    check_close(m_gpu, ops::binary(EwOp::maximum, xc, bc), "maximum", 0, 0);
  }
}

TEST_CASE("max on CUDA keeps the first maximum and propagates NaN", "[cuda][reduce]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_vector(
      std::vector<float>{1, 3, 3, 2, -inf, -inf, -inf, -inf, 1, nan, 5, nan, 2, 2, 2, 2}, {4, 4});
  // Over dim 1 of x (row kernel), and over dim 0 of its dense transpose (column kernel).
  for (std::int64_t d : {1, 0}) {
    const Tensor t = d == 1 ? x : x.t().contiguous();
    auto [vg, ig] = ops::max(gpu(t), d);
    auto [vc, ic] = ops::max(t, d);
    check_close(vg, vc, "values", 0, 0);
    check_close(ig, ic, "indices", 0, 0);
    CHECK(vals(ig) == std::vector<double>{1, 0, 1, 0});
  }
  CHECK_THROWS_WITH(ops::max(gpu(Tensor::zeros({3, 0})), 1), Contains("empty"));
  CHECK(vals(ops::sum(gpu(Tensor::zeros({3, 0})), {1})) == std::vector<double>{0, 0, 0});
}

// ---- softmax family
// -------------------------------------------------------------------------------

TEST_CASE("softmax, log-softmax and their backward on CUDA match the CPU", "[cuda][softmax]") {
  register_builtin_kernels();
  (void)gpu(Tensor::zeros({1}));  // loads the backend (its variants)
  // Every CUDA softmax variant runs every problem, against ref on the CPU.
  test::VariantHarness harness(softmax_table(), DeviceType::cuda, 1);
  harness.require_all();
  for (DType dt : {DType::f32, DType::f64}) {
    for (std::int64_t rows : {1, 3, 33}) {
      for (std::int64_t cols : {1, 7, 1024, 1025, 5000}) {
        const std::string what = std::string(dtype_name(dt)) + " [" + std::to_string(rows) + ", " +
                                 std::to_string(cols) + "]";
        const Tensor x = rnd({rows, cols}, -8, 8, 60 + cols, dt);
        const Tensor dy = rnd({rows, cols}, -1, 1, 61 + cols, dt);
        for (bool log : {false, true}) {
          const SoftmaxOp op = log ? SoftmaxOp::log_softmax : SoftmaxOp::softmax;
          // log_softmax = x - lse: a result near 0 carries lse's rounding, one float ulp of |lse|
          // (up to ~16 here: 1.9e-6) from GPU and CPU expf differing by an ulp or two.
          gpu_against_ref(
              harness, softmax_table(), test::softmax_problem_of(op, gpu(x)),
              [&](Device d) {
                return std::vector<Tensor>{log ? ops::log_softmax(on(x, d))
                                               : ops::softmax(on(x, d))};
              },
              (log ? "log_softmax " : "softmax ") + what, 1e-5, dt == DType::f32 ? 4e-6 : 1e-6);
          // The backward on the same y (ref's, from the CPU).
          Tensor yc;
          {
            ForceVariant force("softmax", "ref");
            yc = log ? ops::log_softmax(x) : ops::softmax(x);
          }
          gpu_against_ref(
              harness, softmax_table(),
              test::softmax_problem_of(
                  log ? SoftmaxOp::log_softmax_backward : SoftmaxOp::softmax_backward, gpu(x)),
              [&](Device d) {
                return std::vector<Tensor>{ops::softmax_backward(on(yc, d), on(dy, d), log)};
              },
              (log ? "log_softmax backward " : "softmax backward ") + what, 1e-5, 1e-6);
        }
      }
    }
  }
  harness.finish();
  // Over a non-last dim through autograd (transposes), and special values.
  const Tensor x = rnd({6, 5, 4}, -3, 3, 70);
  check_close(anvil::softmax(gpu(x), 1), anvil::softmax(x, 1), "softmax dim 1");
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor sp =
      Tensor::from_vector(std::vector<float>{-inf, -inf, -inf, 1, inf, 2, 0, 0, 0}, {3, 3});
  check_close(ops::log_softmax(gpu(sp)), ops::log_softmax(sp), "special values", 0, 0);
}

TEST_CASE("fused cross-entropy on CUDA matches the CPU, with i32 and i64 targets",
          "[cuda][softmax]") {
  register_builtin_kernels();
  (void)gpu(Tensor::zeros({1}));  // loads the backend (its variants)
  test::VariantHarness harness(softmax_table(), DeviceType::cuda, 1);
  harness.require_all();
  for (DType dt : {DType::f32, DType::f64}) {
    for (DType it : {DType::i32, DType::i64}) {
      for (std::int64_t cols : {10, 1000, 10000}) {
        const std::int64_t rows = 37;
        const std::string what = std::string(dtype_name(dt)) + "/" + std::string(dtype_name(it)) +
                                 " C=" + std::to_string(cols);
        const Tensor x = rnd({rows, cols}, -5, 5, 80 + cols, dt);
        const Tensor t = rnd({rows}, 0, static_cast<double>(cols) - 0.01, 81, it);
        // Every CUDA softmax variant: loss, lse and dx against ref on the CPU.
        gpu_against_ref(
            harness, softmax_table(),
            test::softmax_problem_of(SoftmaxOp::cross_entropy_forward, gpu(x), it),
            [&](Device d) {
              auto [l, lse] = ops::cross_entropy_forward(on(x, d), on(t, d));
              return std::vector<Tensor>{
                  l, lse, ops::cross_entropy_backward(on(x, d), on(t, d), lse, 0.37)};
            },
            "CE loss, lse and dx " + what);
        // Through autograd (mean loss, its gradient).
        Tensor xc = x.clone(), xg = gpu(x);
        xc.set_requires_grad(true);
        xg.set_requires_grad(true);
        Tensor loss_c = anvil::cross_entropy(xc, t), loss_g = anvil::cross_entropy(xg, gpu(t));
        CHECK(loss_g.device() == kGpu);
        check_close(loss_g, loss_c, "CE mean " + what);
        loss_c.backward();
        loss_g.backward();
        check_close(xg.grad(), xc.grad(), "CE grad " + what);
      }
    }
  }
  harness.finish();
  const Tensor x = gpu(rnd({4, 5}, -1, 1, 90));
  const Tensor bad = gpu(Tensor::from_vector(std::vector<std::int64_t>{0, 4, 5, -1}, {4}));
  // Detected on the device and reported at the next wait for it (Note [Host waits in a step]):
  // here the copy of the losses back to the host.
  CHECK_THROWS_WITH(ops::cross_entropy_forward(x, bad).first.to(Device::cpu()),
                    Contains("target 5 at row 2 is out of range for 5 classes"));
  const Tensor bad32 = gpu(Tensor::from_vector(std::vector<std::int32_t>{0, -3, 1, 1}, {4}));
  CHECK_THROWS_WITH(ops::cross_entropy_forward(x, bad32).first.to(Device::cpu()),
                    Contains("target -3 at row 1"));
  // The device and the engine stay usable after the error.
  CHECK(ops::sum(x).device() == kGpu);
}

TEST_CASE("binary cross-entropy with logits on CUDA matches the CPU", "[cuda][softmax]") {
  Tensor xc = rnd({7, 9}, -30, 30, 95, DType::f64), tc = rnd({7, 9}, 0, 1, 96, DType::f64);
  Tensor xg = gpu(xc), tg = gpu(tc);
  for (Tensor* t : {&xc, &tc, &xg, &tg}) t->set_requires_grad(true);
  Tensor lc = binary_cross_entropy_with_logits(xc, tc),
         lg = binary_cross_entropy_with_logits(xg, tg);
  check_close(lg, lc, "bce loss", 1e-12, 1e-12);
  lc.backward();
  lg.backward();
  check_close(xg.grad(), xc.grad(), "bce dx", 1e-12, 1e-14);
  check_close(tg.grad(), tc.grad(), "bce dt", 1e-12, 1e-14);
}

// ---- autograd on CUDA
// ----------------------------------------------------------------------------

TEST_CASE("float64 gradient check of an MLP-like composition run on CUDA", "[cuda][gradcheck]") {
  // Inputs are CPU leaves; the function moves them to the GPU (a differentiable copy), computes
  // there and brings the result back, so the central differences run through the CUDA kernels.
  // The matrix products are broadcast multiplies plus sums (elementwise + column/row reductions),
  // independent of the GEMM variants.
  const Tensor target = Tensor::from_vector(std::vector<std::int64_t>{2, 0, 3, 1, 3}, {5});
  auto mlp = [target](const std::vector<Tensor>& in, Device dev) {
    const Tensor x = in[0].to(dev), w1 = in[1].to(dev), b1 = in[2].to(dev);
    const Tensor w2 = in[3].to(dev), b2 = in[4].to(dev);
    // x [5, 3], w1 [3, 6], b1 [6], w2 [6, 4], b2 [4]
    Tensor h = anvil::sum(x.unsqueeze(2) * w1.unsqueeze(0), {1}) + b1;  // [5, 6]
    h = anvil::tanh(h) + anvil::sigmoid(h) * 0.5;
    Tensor logits = anvil::sum(h.unsqueeze(2) * w2.unsqueeze(0), {1}) + b2;  // [5, 4]
    Tensor ce = anvil::cross_entropy(logits, target.to(dev));
    Tensor lsm = anvil::log_softmax(logits, 0);
    Tensor mx =
        anvil::max(anvil::exp(logits * 0.3) / anvil::sum(anvil::pow(h, 2.0) + 1.0, {1}, true), 1);
    return (anvil::mean(lsm, {1}) + mx + ce).to(Device::cpu());
  };
  const std::vector<Tensor> inputs = {
      uniform_leaf({5, 3}, -1, 1, 101), uniform_leaf({3, 6}, -1, 1, 102),
      uniform_leaf({6}, -0.5, 0.5, 103), uniform_leaf({6, 4}, -1, 1, 104),
      uniform_leaf({4}, -0.5, 0.5, 105)};
  const auto r = gradcheck(
      "mlp_on_cuda", [&](const std::vector<Tensor>& in) { return mlp(in, kGpu); }, inputs);
  INFO(r.message);
  CHECK(r.ok);
  // The CUDA gradients equal the CPU gradients of the same function.
  std::vector<Tensor> a, b;
  for (const Tensor& t : inputs) {
    a.push_back(t.detach().clone());
    b.push_back(t.detach().clone());
    a.back().set_requires_grad(true);
    b.back().set_requires_grad(true);
  }
  anvil::sum(mlp(a, kGpu)).backward();
  anvil::sum(mlp(b, Device::cpu())).backward();
  for (std::size_t i = 0; i < a.size(); ++i)
    CHECK(anvil::test::max_abs_diff(a[i].grad(), b[i].grad()) < 1e-12);
}
