// SPDX-License-Identifier: Apache-2.0
// The CUDA GEMM variants (cuda.cublas, cuda.cublas.tf32, cuda.custom.gemm_tiled) against the
// CPU `ref` on the same values: the four transpose modes, alpha/beta (beta = 0 with NaN in C),
// batches (also a broadcast operand), odd sizes, padded leading dimensions (views with ld > cols,
// C's padding must stay untouched), f64 on cuda.cublas, selection and forcing through the gemm
// table and ops::mm; plus large host <-> device copies (pinned staging). Runs only with a GPU
// (gpu_main.cpp reports the binary skipped otherwise).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/cuda_backend.h"
#include "engine/core/random.h"
#include "engine/core/tensor.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/ops/gemm.h"
#include "helpers/variant_harness.h"
#include "kernels/register.h"

using namespace anvil;
using Catch::Matchers::Contains;

namespace {

const std::vector<std::string> kCudaVariants = {"cuda.cublas", "cuda.cublas.tf32",
                                                "cuda.custom.gemm_tiled"};
constexpr double kSentinel = 7.25;  // in C's padding columns: must survive every GEMM
constexpr double kEps32 = std::numeric_limits<float>::epsilon();

bool is_tf32(const std::string& v) { return v.find("tf32") != std::string::npos; }

std::vector<double> host_f64(const Tensor& t) {
  Tensor c = t.to(Device::cpu()).to(DType::f64).contiguous();
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

struct GemmCase {
  std::int64_t m, n, k;
  std::int64_t batch = 0;  // 0: 2-D operands; else 3-D with this batch
  double alpha = 1.0, beta = 0.0;
  std::int64_t pad = 0;      // extra columns of stored A, B and C (ld = cols + pad)
  bool nan_c = false;        // C starts as NaN (with beta = 0 it must not propagate)
  bool broadcast_a = false;  // A is one matrix expanded over the batch (batch stride 0)
};

std::string describe(const GemmCase& c, bool ta, bool tb) {
  return std::string(ta ? "T" : "N") + (tb ? "T" : "N") + " M=" + std::to_string(c.m) +
         " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) +
         " batch=" + std::to_string(c.batch) + " alpha=" + std::to_string(c.alpha) +
         " beta=" + std::to_string(c.beta) + " pad=" + std::to_string(c.pad) +
         (c.nan_c ? " nanC" : "") + (c.broadcast_a ? " broadcastA" : "");
}

// A stored operand [rows, cols] (with a batch dim when batch > 0) as a view of a wider
// [rows, cols + pad] tensor, on the host and, with the same values, on the GPU.
struct Operand {
  Tensor host, gpu;
};
Operand make_operand(std::int64_t batch, std::int64_t rows, std::int64_t cols, std::int64_t pad,
                     bool broadcast, Generator& gen) {
  Shape full = {rows, cols + pad};
  if (batch > 0) full.insert(full.begin(), broadcast ? 1 : batch);
  const Tensor host_full = uniform(full, -1.0, 1.0, DType::f32, &gen);
  const Tensor gpu_full = host_full.to(Device::cuda());
  Operand o{host_full.slice(-1, 0, cols), gpu_full.slice(-1, 0, cols)};
  if (broadcast && batch > 0) {
    o.host = o.host.expand({batch, rows, cols});
    o.gpu = o.gpu.expand({batch, rows, cols});
  }
  return o;
}

// Runs the case on every CUDA variant (tests/helpers/variant_harness.h: each forced by name, the
// opt-in TF32 one too) and compares with `ref` (f64, CPU) on the same values.
void check_case(const GemmCase& gc, bool ta, bool tb, test::VariantHarness& harness,
                std::uint64_t seed) {
  Generator gen(seed);
  const std::int64_t bt = gc.batch;
  const Operand A = ta ? make_operand(bt, gc.k, gc.m, gc.pad, gc.broadcast_a, gen)
                       : make_operand(bt, gc.m, gc.k, gc.pad, gc.broadcast_a, gen);
  const Operand B = tb ? make_operand(bt, gc.n, gc.k, gc.pad, false, gen)
                       : make_operand(bt, gc.k, gc.n, gc.pad, false, gen);
  Shape c_full_shape = {gc.m, gc.n + gc.pad};
  Shape c_shape = {gc.m, gc.n};
  if (bt > 0) {
    c_full_shape.insert(c_full_shape.begin(), bt);
    c_shape.insert(c_shape.begin(), bt);
  }
  // C's initial values, written into a sentinel-filled wider tensor on the host, then copied.
  Tensor c0 = uniform(c_shape, -1.0, 1.0, DType::f32, &gen);
  if (gc.nan_c) c0.fill_(std::numeric_limits<double>::quiet_NaN());
  Tensor c_full_host = Tensor::full(c_full_shape, kSentinel);
  c_full_host.slice(-1, 0, gc.n).copy_(c0);

  // Reference: ref in double on the same f32 values.
  Tensor want = gc.nan_c ? Tensor::zeros(c_shape, DType::f64) : c0.to(DType::f64);
  {
    ForceVariant force("gemm", "ref");
    ops::gemm(A.host.to(DType::f64), ta, B.host.to(DType::f64), tb, want, gc.alpha, gc.beta);
  }
  const std::vector<double> ref = host_f64(want);
  const double a_max = anvil::test::max_abs(A.host), b_max = anvil::test::max_abs(B.host);
  const double c_max = gc.nan_c ? 0.0 : anvil::test::max_abs(c0);
  const double k = static_cast<double>(std::max<std::int64_t>(gc.k, 1));
  Tensor c_full_gpu = c_full_host.to(Device::cuda());
  Tensor c_gpu = c_full_gpu.slice(-1, 0, gc.n);
  const GemmProblem p = ops::gemm_problem_for(A.gpu, ta, B.gpu, tb, c_gpu, gc.beta);
  harness.run(gemm_table(), p, describe(gc, ta, tb), [&](const GemmTable::Variant& v) {
    c_full_gpu.copy_(c_full_host);
    std::string bad;
    if (gemm_table().select(p).name != v.name) bad = "forcing did not select the variant; ";
    // A single-row C gets ldc = N whatever its row stride (ops::gemm's make_problem).
    if (gc.pad > 0 && gc.m > 1 && p.ldc != gc.n + gc.pad)
      bad += "ldc " + std::to_string(p.ldc) + " is not N + pad; ";
    ops::gemm(A.gpu, ta, B.gpu, tb, c_gpu, gc.alpha, gc.beta);  // forced by the harness
    const std::vector<double> full = host_f64(c_full_gpu);
    // FP32: the CPU suite's bound (tests/test_gemm_variants.cpp). TF32: each product within
    // (2u + u^2)|a||b|, u = 2^-10, so K * 3e-3 * max|a| max|b| bounds the sum (Note [TF32 is
    // opt-in], kernels/cuda/gemm_cublas.cpp).
    const double product_tol = is_tf32(v.name) ? 3e-3 * k : 32.0 * kEps32 * std::sqrt(k);
    const double tol = product_tol * a_max * b_max * std::fabs(gc.alpha) +
                       8.0 * kEps32 * std::fabs(gc.beta) * c_max + 1e-30;
    const std::int64_t rows = (bt > 0 ? bt : 1) * gc.m, ld = gc.n + gc.pad;
    std::vector<double> got;
    int sentinel_bad = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < ld; ++j) {
        const double x = full[r * ld + j];
        if (j >= gc.n)
          sentinel_bad += x != kSentinel;
        else
          got.push_back(x);
      }
    bad += anvil::test::compare("C", got, ref, tol);
    if (sentinel_bad > 0)
      bad += std::to_string(sentinel_bad) + " elements of C's padding columns were written";
    return bad;
  });
}

std::vector<GemmCase> cases() {
  std::vector<GemmCase> out = {
      {1, 1, 1},
      {7, 33, 129},
      {33, 7, 1},
      {129, 65, 33, 0, 0.5, -1.5},
      {64, 64, 16},                                // exactly one tile and one K slab
      {65, 130, 17, 0, -2.0, 0.25, 3},             // partial tiles in every direction, padded ld
      {1, 129, 7, 0, 1.0, 1.0, 5},                 // a single row (GEMV-like), beta = 1
      {129, 1, 64, 0, 1.0, 0.0, 2},                // a single column
      {33, 17, 9, 0, 1.0, 0.0, 0, true},           // beta = 0 with NaN in C
      {17, 33, 40, 3, 0.75, 0.5, 2},               // batched with padded ld
      {20, 9, 31, 4, 1.0, 0.0, 1, true},           // batched, NaN C, beta = 0
      {12, 34, 56, 3, 1.0, -1.0, 0, false, true},  // batched, A broadcast (batch stride 0)
  };
  return out;
}

}  // namespace

// Their registration and order are tests/cuda/test_cuda_lazy_load.cpp's (no GPU needed). TF32
// and the tiled kernel are never the default (Note [TF32 is opt-in]).
TEST_CASE("the CUDA GEMM variants select as documented", "[cuda][gemm]") {
  require_cuda("test");
  register_builtin_kernels();
  GemmProblem p = GemmProblem::dense(64, 64, 64, false, true);
  p.device = Device::cuda();
  CHECK(gemm_table().select(p).name == "cuda.cublas");
  p.dtype = DType::f64;
  CHECK(gemm_table().select(p).name == "cuda.cublas");
  for (const auto& c : gemm_table().candidates(p))
    if (c.name == "cuda.cublas.tf32" || c.name == "cuda.custom.gemm_tiled") {
      CHECK_FALSE(c.support.ok);
      CHECK_THAT(c.support.reason, Contains("f32 only"));
    }
  // A CPU problem never reaches them.
  const GemmProblem cpu = GemmProblem::dense(8, 8, 8, false, false);
  for (const auto& c : gemm_table().candidates(cpu))
    if (c.name.rfind("cuda.", 0) == 0) CHECK_THAT(c.support.reason, Contains("runs on cuda"));
}

TEST_CASE("CUDA GEMM variants match ref in every mode, shape, alpha/beta and batch",
          "[cuda][gemm]") {
  require_cuda("test");
  register_builtin_kernels();
  // Every CUDA variant runs every problem (all are f32).
  test::VariantHarness harness(gemm_table(), DeviceType::cuda,
                               static_cast<int>(cases().size()) * 4);
  std::uint64_t seed = 100;
  for (const auto& gc : cases())
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) check_case(gc, ta, tb, harness, ++seed);
  harness.finish();
}

TEST_CASE("CUDA GEMM on larger shapes: many tiles and K slabs", "[cuda][gemm]") {
  require_cuda("test");
  register_builtin_kernels();
  const GemmCase big{257, 300, 513, 0, 1.0, 0.0, 4};
  test::VariantHarness harness(gemm_table(), DeviceType::cuda, 4);
  std::uint64_t seed = 900;
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) check_case(big, ta, tb, harness, ++seed);
  harness.finish();
}

TEST_CASE("cuda.cublas computes f64 GEMMs and the f32-only variants refuse them", "[cuda][gemm]") {
  require_cuda("test");
  register_builtin_kernels();
  Generator gen(5);
  const Tensor a = uniform({37, 19}, -1, 1, DType::f64, &gen);
  const Tensor b = uniform({23, 19}, -1, 1, DType::f64, &gen);
  Tensor want;
  {
    ForceVariant force("gemm", "ref");
    want = ops::mm(a, false, b, true);
  }
  Tensor got;
  {
    ForceVariant force("gemm", "cuda.cublas");
    got = ops::mm(a.to(Device::cuda()), false, b.to(Device::cuda()), true);
  }
  CHECK(got.device() == Device::cuda());
  const auto g = host_f64(got), w = host_f64(want);
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == Approx(w[i]).margin(1e-12));
  for (const char* name : {"cuda.cublas.tf32", "cuda.custom.gemm_tiled"}) {
    ForceVariant force("gemm", name);
    CHECK_THROWS_WITH(ops::mm(a.to(Device::cuda()), false, b.to(Device::cuda()), true),
                      Contains(name) && Contains("f32 only"));
  }
}

TEST_CASE("ops::mm on CUDA tensors runs the forced variant and the default", "[cuda][gemm]") {
  require_cuda("test");
  register_builtin_kernels();
  Generator gen(11);
  const Tensor a = uniform({45, 70}, -1, 1, DType::f32, &gen);
  const Tensor b = uniform({70, 38}, -1, 1, DType::f32, &gen);
  Tensor want;
  {
    ForceVariant force("gemm", "ref");
    want = ops::mm(a.to(DType::f64), false, b.to(DType::f64), false);
  }
  const auto w = host_f64(want);
  const Tensor ag = a.to(Device::cuda()), bg = b.to(Device::cuda());
  // A transposed view of a GPU tensor becomes a transpose mode, not a copy.
  const Tensor bt_g = b.t().contiguous().to(Device::cuda());
  for (const std::string& name :
       {std::string("default"), kCudaVariants[0], kCudaVariants[1], kCudaVariants[2]}) {
    INFO(name);
    std::unique_ptr<ForceVariant> force;
    if (name != "default") force = std::make_unique<ForceVariant>("gemm", name);
    const double tol = (is_tf32(name) ? 3e-3 * 70 : 1e-5 * 70);
    for (const Tensor& got : {ops::mm(ag, false, bg, false), ops::mm(ag, false, bt_g.t(), false),
                              ops::mm(ag, false, bt_g, true)}) {
      REQUIRE(got.device() == Device::cuda());
      REQUIRE(got.sizes() == Shape{45, 38});
      CHECK(anvil::test::max_error(host_f64(got), w).worst <= tol);
    }
  }
}

TEST_CASE("GEMM variants refuse operands on the wrong device", "[cuda][gemm]") {
  require_cuda("test");
  register_builtin_kernels();
  const Tensor a = Tensor::ones({4, 4}, DType::f32, Device::cuda());
  const Tensor b = Tensor::ones({4, 4});
  CHECK_THROWS_AS(ops::mm(a, false, b, false), Error);
  ForceVariant force("gemm", "cuda.cublas");
  CHECK_THROWS_WITH(ops::mm(b, false, b, false),
                    Contains("cuda.cublas") && Contains("runs on cuda"));
}

TEST_CASE("large host <-> device copies keep every byte (pinned staging)", "[cuda][copy]") {
  require_cuda("test");
  // Sizes below, at and across the staging chunk (4 MiB) and threshold (256 KiB), with an odd
  // tail, from contiguous and offset (not 64-byte aligned) host memory.
  for (const std::int64_t n : {std::int64_t{1000}, std::int64_t{65536}, std::int64_t{1} << 20,
                               (std::int64_t{9} << 20) / 4 + 3}) {
    INFO("elements " << n);
    Tensor host = Tensor::arange(static_cast<double>(n + 1), DType::f32);
    const Tensor src = host.slice(0, 1, n + 1);  // offset by one element
    const Tensor g = src.to(Device::cuda());
    Tensor back = Tensor::full({n + 1}, -1.0);
    back.slice(0, 1, n + 1).copy_(g);
    const float* p = back.data<float>();
    bool same = p[0] == -1.0f;
    for (std::int64_t i = 1; i <= n && same; ++i) same = p[i] == static_cast<float>(i);
    CHECK(same);
  }
}
