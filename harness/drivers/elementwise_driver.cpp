// SPDX-License-Identifier: Apache-2.0
// The elementwise driver (Note [Op drivers]): each variant called directly on its
// ElementwiseArgs, as ops::unary/ops::binary build them (engine/ops/elementwise.cpp), against
// `ref` in f64 on the host on the same values. A contiguous problem is dense [numel] operands;
// a strided one reads a every 2nd and b every 3rd element of larger buffers (the output stays
// dense). Integer problems compare exactly; the output starts as NaN (a sentinel for integers).
// Operands respect the op's domain: a > 0 for log, sqrt, pow, the scalar powers and s / a; b in
// [0.5, 2] (a divisor away from 0). The broadcast, transposed and aliased layouts of the ops
// layer are tests/test_elementwise_variants.cpp's.
// Group "ops": every op x f32, f64 x a small and an above-the-parallel-grain contiguous problem
// and a strided one; the integer ops also x i32, i64.
#include <functional>

#include "engine/core/random.h"
#include "engine/core/views.h"
#include "engine/dispatch/elementwise_problem.h"
#include "harness/drivers/driver_kit.h"
#include "harness/drivers/drivers.h"

namespace anvil::harness {
namespace {

constexpr int kEwOps = static_cast<int>(EwOp::pow_scalar_backward) + 1;
constexpr double kIntSentinel = -7777;

bool positive_a(EwOp op) {
  return op == EwOp::log || op == EwOp::sqrt || op == EwOp::pow || op == EwOp::pow_scalar ||
         op == EwOp::rdiv_scalar || op == EwOp::pow_scalar_backward;
}

// U(low, high) for floating dtypes, integers in [-5, 5] for the integer ones.
Tensor values(std::int64_t n, double low, double high, DType dtype, Generator& gen) {
  if (!is_floating(dtype)) return randint({n}, -5, 6, dtype, &gen);
  return uniform({n}, low, high, dtype, &gen);
}

class ElementwiseCase final : public OpCase {
 public:
  ElementwiseCase(const ElementwiseTable& table, const ElementwiseProblem& p, std::uint64_t seed,
                  std::function<double(const std::string&)> bound)
      : table_(table), p_(p), bound_(std::move(bound)) {
    Generator gen(seed);
    const std::int64_t step_a = p.contiguous ? 1 : 2, step_b = p.contiguous ? 1 : 3;
    const Tensor a = values(p.numel * step_a, positive_a(p.op) ? 0.5 : -2.0, 2.0, p.dtype, gen);
    const Tensor b = values(p.numel * step_b, 0.5, 2.0, p.dtype, gen);
    a_ = {placed_on(a, p.device), raw::to_dtype(a, DType::f64)};
    b_ = {placed_on(b, p.device), raw::to_dtype(b, DType::f64)};
    if (!p.contiguous) {
      a_ = {raw::slice(a_.dev, 0, 0, p.numel * 2, 2), raw::slice(a_.f64, 0, 0, p.numel * 2, 2)};
      b_ = {raw::slice(b_.dev, 0, 0, p.numel * 3, 3), raw::slice(b_.f64, 0, 0, p.numel * 3, 3)};
    }
    const bool integers = !is_floating(p.dtype);
    scalar_ = integers ? 3.0 : 1.75;  // scalars the integer kernels represent exactly
    alpha_ = integers ? 2.0 : 0.5;
  }

  void prepare(const std::string& variant) override {
    fn_ = supported_variant(table_, variant, p_).fn;
    name_ = variant;
    out_ = is_floating(p_.dtype) ? nan_tensor({p_.numel}, p_.dtype, p_.device)
                                 : filled_tensor({p_.numel}, kIntSentinel, p_.dtype, p_.device);
  }
  void run() override {
    ANVIL_CHECK(fn_ != nullptr, "elementwise", "run() before prepare()");
    fn_(args(p_, out_, a_.dev, b_.dev));
  }
  std::string check() override {
    if (!ref_.defined()) {
      ElementwiseProblem pr = p_;
      pr.dtype = DType::f64;
      pr.device = Device::cpu();
      ref_ = nan_tensor({p_.numel}, DType::f64, Device::cpu());
      supported_variant(table_, "ref", pr).fn(args(pr, ref_, a_.f64, b_.f64));
    }
    if (!out_.defined()) return "no output: prepare() did not complete; ";
    // ref in f64 rounds once less than the variant: a few units of the dtype's rounding.
    return compare_scaled("out", out_, ref_, bound_(name_));
  }

 private:
  ElementwiseArgs args(const ElementwiseProblem& p, const Tensor& out, const Tensor& a,
                       const Tensor& b) const {
    ElementwiseArgs x;
    x.problem = p;
    x.sizes = out.sizes().data();
    x.ndim = static_cast<int>(out.dim());
    x.out = {out.data_ptr(), out.strides().data()};
    x.a = {a.data_ptr(), a.strides().data()};
    if (ew_arity(p.op) == 2) x.b = {b.data_ptr(), b.strides().data()};
    x.scalar = scalar_;
    x.alpha = alpha_;
    return x;
  }

  const ElementwiseTable& table_;
  ElementwiseProblem p_;
  std::function<double(const std::string&)> bound_;
  Operand a_, b_;
  double scalar_ = 0.0, alpha_ = 1.0;
  std::function<void(const ElementwiseArgs&)> fn_;
  std::string name_;
  Tensor out_, ref_;
};

class ElementwiseDriver final : public TableDriver<ElementwiseProblem, ElementwiseTable> {
 public:
  ElementwiseDriver() : TableDriver(elementwise_table()) {}

  std::vector<std::string> groups() const override { return {"ops"}; }

  std::vector<nn::NamedProblem> group(const std::string& name) const override {
    ANVIL_CHECK(name == "ops", "elementwise driver", "no problem group '", name,
                "' (expected ops)");
    std::vector<nn::NamedProblem> out;
    for (int o = 0; o < kEwOps; ++o) {
      const auto op = static_cast<EwOp>(o);
      for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::i64}) {
        if (!is_floating(dtype) && !ew_allows_integers(op)) continue;
        for (const auto& [numel, contiguous] :
             {std::pair<std::int64_t, bool>{7, true}, {40000, true}, {300, false}}) {
          ElementwiseProblem p;
          p.op = op;
          p.dtype = dtype;
          p.numel = numel;
          p.contiguous = contiguous;
          out.push_back({p.repr(), p});
        }
      }
    }
    return out;
  }

  std::vector<OpProblem> passes(const OpProblem& p) const override { return {p}; }

  std::unique_ptr<OpCase> make_case(const OpProblem& p, std::uint64_t seed) const override {
    const ElementwiseProblem& q = std::get<ElementwiseProblem>(p);
    return std::make_unique<ElementwiseCase>(table_, q, seed, bound_of(q.dtype));
  }

  // One rounding of the result (a few for the vectorised exp, tanh and pow approximations);
  // integers are exact.
  double tolerance(const std::string& variant, DType dtype) const override {
    return is_floating(dtype) ? 8.0 * rounding_of(variant, dtype) : 0.0;
  }

  // One operation per output element; each operand read and the output written once.
  double flops(const OpProblem& p) const override {
    return static_cast<double>(std::get<ElementwiseProblem>(p).numel);
  }
  double bytes(const OpProblem& p) const override {
    const ElementwiseProblem& q = std::get<ElementwiseProblem>(p);
    return static_cast<double>((ew_arity(q.op) + 1) * q.numel * dtype_size(q.dtype));
  }

  // Every CPU variant runs every problem.
  int minimum_problems(const std::string& group, DeviceType device) const override {
    if (device == DeviceType::cuda) return kCudaMinimumPairs;
    return static_cast<int>(this->group(group).size());
  }
};

}  // namespace

std::unique_ptr<OpDriver> make_elementwise_driver() {
  return std::make_unique<ElementwiseDriver>();
}

}  // namespace anvil::harness
