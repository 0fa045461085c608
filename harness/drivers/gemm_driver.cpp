// SPDX-License-Identifier: Apache-2.0
// The gemm driver (Note [Op drivers]): each variant called directly on its GemmArgs over flat
// buffers sized by the problem's leading dimensions and batch strides, C = 1.5 op(A) op(B)
// (+ 0.5 C when the problem reads C), against `ref` in f64 on the host. With beta = 0, C starts
// as NaN (a variant must not read it); padding between rows stays as it was.
// Groups: "odd" (every transpose mode x odd sizes 1, 7, 33, 129 x beta = 0 and beta != 0) and
// "views" (padded leading dimensions, batches with gaps between matrices).
#include <cmath>
#include <functional>

#include "engine/dispatch/gemm_problem.h"
#include "harness/drivers/driver_kit.h"
#include "harness/drivers/drivers.h"

namespace anvil::harness {
namespace {

constexpr double kAlpha = 1.5, kBeta = 0.5;

// Elements a stored operand spans: `batch` matrices `stride` apart, `rows` rows `ld` apart.
std::int64_t span(std::int64_t batch, std::int64_t stride, std::int64_t rows, std::int64_t cols,
                  std::int64_t ld) {
  if (rows == 0 || cols == 0) return 1;
  return (batch - 1) * stride + (rows - 1) * ld + cols;
}

class GemmCase final : public OpCase {
 public:
  GemmCase(const GemmTable& table, const GemmProblem& p, std::uint64_t seed,
           std::function<double(const std::string&)> bound)
      : table_(table), p_(p), bound_(std::move(bound)) {
    Generator gen(seed);
    const std::int64_t ar = p.trans_a ? p.k : p.m, ac = p.trans_a ? p.m : p.k;
    const std::int64_t br = p.trans_b ? p.n : p.k, bc = p.trans_b ? p.k : p.n;
    a_ = uniform_operand({span(p.batch, p.stride_a, ar, ac, p.lda)}, -1, 1, p.dtype, p.device, gen);
    b_ = uniform_operand({span(p.batch, p.stride_b, br, bc, p.ldb)}, -1, 1, p.dtype, p.device, gen);
    c0_ = uniform_operand({span(p.batch, p.stride_c, p.m, p.n, p.ldc)}, -1, 1, p.dtype, p.device,
                          gen);
    if (p.beta_zero) {
      c0_.dev = nan_tensor(c0_.dev.sizes(), p.dtype, p.device);
      c0_.f64 = nan_tensor(c0_.f64.sizes(), DType::f64, Device::cpu());
    }
  }

  void prepare(const std::string& variant) override {
    fn_ = supported_variant(table_, variant, p_).fn;
    name_ = variant;
    c_ = c0_.dev.clone();
  }
  void run() override {
    ANVIL_CHECK(fn_ != nullptr, "gemm", "run() before prepare()");
    fn_(GemmArgs{p_, a_.dev.data_ptr(), b_.dev.data_ptr(), c_.data_ptr(), kAlpha,
                 p_.beta_zero ? 0.0 : kBeta});
  }
  std::string check() override {
    if (!ref_c_.defined()) {
      GemmProblem pr = p_;
      pr.dtype = DType::f64;
      pr.device = Device::cpu();
      ref_c_ = c0_.f64.clone();
      supported_variant(table_, "ref", pr)
          .fn(GemmArgs{pr, a_.f64.data_ptr(), b_.f64.data_ptr(), ref_c_.data_ptr(), kAlpha,
                       p_.beta_zero ? 0.0 : kBeta});
    }
    // Padding of C is NaN on both sides with beta = 0.
    return compare_scaled("C", c_, ref_c_, bound_(name_) * std::sqrt(std::max<double>(p_.k, 1.0)),
                          /*nan_matches_nan=*/true);
  }

 private:
  const GemmTable& table_;
  GemmProblem p_;
  std::function<double(const std::string&)> bound_;
  Operand a_, b_, c0_;
  std::function<void(const GemmArgs&)> fn_;
  std::string name_;
  Tensor c_, ref_c_;
};

class GemmDriver final : public TableDriver<GemmProblem, GemmTable> {
 public:
  GemmDriver() : TableDriver(gemm_table()) {}

  std::vector<std::string> groups() const override { return {"odd", "views"}; }

  std::vector<nn::NamedProblem> group(const std::string& name) const override {
    std::vector<nn::NamedProblem> out;
    if (name == "odd") {
      const std::int64_t sizes[][3] = {{1, 1, 1},    {7, 33, 1},   {33, 7, 129},
                                       {129, 33, 7}, {1, 129, 33}, {33, 129, 129}};
      for (const auto& s : sizes)
        for (int mode = 0; mode < 4; ++mode)
          for (bool beta_zero : {true, false}) {
            GemmProblem p = GemmProblem::dense(s[0], s[1], s[2], mode >= 2, mode % 2 == 1);
            p.beta_zero = beta_zero;
            out.push_back({detail::str_cat(p.mode(), " ", s[0], "x", s[1], "x", s[2],
                                           beta_zero ? "" : " beta"),
                           p});
          }
      return out;
    }
    ANVIL_CHECK(name == "views", "gemm driver", "no problem group '", name,
                "' (expected odd or views)");
    for (int mode = 0; mode < 4; ++mode) {
      GemmProblem p = GemmProblem::dense(17, 9, 13, mode >= 2, mode % 2 == 1);
      p.lda += 3;
      p.ldb += 5;
      p.ldc += 2;
      out.push_back({detail::str_cat(p.mode(), " padded leading dims"), p});
      GemmProblem b = GemmProblem::dense(5, 11, 7, mode >= 2, mode % 2 == 1, DType::f32, 3);
      b.stride_a += 4;
      b.stride_b += 6;
      b.stride_c += 8;
      b.beta_zero = mode % 2 == 0;
      out.push_back({detail::str_cat(b.mode(), " batch 3 with gaps"), b});
    }
    return out;
  }

  std::vector<OpProblem> passes(const OpProblem& p) const override { return {p}; }

  std::unique_ptr<OpCase> make_case(const OpProblem& p, std::uint64_t seed) const override {
    const GemmProblem& q = std::get<GemmProblem>(p);
    return std::make_unique<GemmCase>(table_, q, seed, bound_of(q.dtype));
  }

  double tolerance(const std::string& variant, DType dtype) const override {
    return 16.0 * rounding_of(variant, dtype);
  }

  int minimum_problems(const std::string& group, DeviceType device) const override {
    if (device == DeviceType::cuda) return kCudaMinimumPairs;
    return group == "odd" ? 48 : 8;
  }
};

}  // namespace

std::unique_ptr<OpDriver> make_gemm_driver() { return std::make_unique<GemmDriver>(); }

}  // namespace anvil::harness
