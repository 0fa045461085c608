// SPDX-License-Identifier: Apache-2.0
// The elementwise driver (Note [Op drivers]): each variant called directly on its
// ElementwiseArgs, as ops::unary/ops::binary build them (engine/ops/elementwise.cpp), against
// `ref` in f64 on the host on the same values. A contiguous problem is dense [numel] operands;
// a strided one takes the layout of layouts() with its numel (broadcast rows and columns, a 0-D
// b, transposed, stepped and permuted views: the cpu.omp paths of dense, bias-like and general
// inner loops), or else reads a every 2nd and b every 3rd element of larger buffers. The output
// is dense. Integer problems compare exactly; the output starts as NaN (a sentinel for
// integers). Operands respect the op's domain: a > 0 for log, sqrt, pow, the scalar powers and
// s / a; b in [0.5, 2] (a divisor away from 0). Strided and aliased outputs and the op's
// formula are tests/test_elementwise_variants.cpp's.
// Group "ops": every op x f32, f64 x a small and an above-the-parallel-grain contiguous problem
// and each strided layout; the integer ops also x i32, i64.
#include <functional>
#include <vector>

#include "engine/core/random.h"
#include "engine/core/views.h"
#include "engine/dispatch/elementwise_problem.h"
#include "harness/drivers/driver_kit.h"
#include "harness/drivers/drivers.h"

namespace anvil::harness {
namespace {

constexpr double kIntSentinel = -7777;

bool positive_a(EwOp op) {
  return op == EwOp::log || op == EwOp::sqrt || op == EwOp::pow || op == EwOp::pow_scalar ||
         op == EwOp::rdiv_scalar || op == EwOp::pow_scalar_backward;
}

// U(low, high) for floating dtypes, integers in [-5, 5] for the integer ones.
Tensor values(const Shape& shape, double low, double high, DType dtype, Generator& gen) {
  if (!is_floating(dtype)) return randint(shape, -5, 6, dtype, &gen);
  return uniform(shape, low, high, dtype, &gen);
}

// A strided problem's operands: views of fresh buffers, broadcast to `out` (out is dense).
struct Layout {
  const char* name;
  Shape out, a_buffer, b_buffer;
  Tensor (*a_view)(const Tensor&);
  Tensor (*b_view)(const Tensor&);
};
Tensor whole(const Tensor& t) { return t; }

// Distinct numels: a strided problem finds its layout by numel.
const std::vector<Layout>& layouts() {
  static const std::vector<Layout> l = {
      {"row-broadcast b (bias-like)", {300, 130}, {300, 130}, {130}, whole, whole},
      {"column-broadcast b", {40, 1000}, {40, 1000}, {40, 1}, whole, whole},
      {"column-broadcast b, small", {6, 10}, {6, 10}, {6, 1}, whole, whole},
      {"broadcast a against b", {6, 9}, {1, 9}, {6, 1}, whole, whole},
      {"0-D b", {4, 3}, {4, 3}, {}, whole, whole},
      {"transposed a",
       {251, 160},
       {160, 251},
       {251, 160},
       [](const Tensor& a) { return raw::transpose(a, 0, 1); },
       whole},
      {"stepped slices",
       {8, 3},
       {8, 10},
       {16, 3},
       [](const Tensor& a) { return raw::slice(a, 1, 1, 10, 3); },
       [](const Tensor& b) { return raw::slice(b, 0, 0, 16, 2); }},
      {"permuted 3-D",
       {7, 3, 4},
       {3, 4, 7},
       {7, 3, 4},
       [](const Tensor& a) {
         return raw::permute(a, {2, 0, 1});
       },
       whole},
  };
  return l;
}

// The layout of a strided problem of `numel` elements: the one of layouts() with that numel, or
// the stepped 1-D one.
Layout layout_of(std::int64_t numel) {
  for (const auto& l : layouts())
    if (shape_numel(l.out) == numel) return l;
  return {"stepped 1-D (a every 2nd, b every 3rd)",
          {numel},
          {numel * 2},
          {numel * 3},
          [](const Tensor& a) { return raw::slice(a, 0, 0, a.numel(), 2); },
          [](const Tensor& b) { return raw::slice(b, 0, 0, b.numel(), 3); }};
}

class ElementwiseCase final : public OpCase {
 public:
  ElementwiseCase(const ElementwiseTable& table, const ElementwiseProblem& p, std::uint64_t seed,
                  std::function<double(const std::string&)> bound)
      : table_(table), p_(p), bound_(std::move(bound)) {
    Generator gen(seed);
    const Layout l = p.contiguous ? Layout{"dense", {p.numel}, {p.numel}, {p.numel}, whole, whole}
                                  : layout_of(p.numel);
    out_shape_ = l.out;
    const Tensor a = values(l.a_buffer, positive_a(p.op) ? 0.5 : -2.0, 2.0, p.dtype, gen);
    const Tensor b = values(l.b_buffer, 0.5, 2.0, p.dtype, gen);
    const auto view = [&](Tensor (*v)(const Tensor&), const Tensor& t) {
      return raw::expand(v(t), l.out);
    };
    a_ = {view(l.a_view, placed_on(a, p.device)), view(l.a_view, raw::to_dtype(a, DType::f64))};
    b_ = {view(l.b_view, placed_on(b, p.device)), view(l.b_view, raw::to_dtype(b, DType::f64))};
    const bool integers = !is_floating(p.dtype);
    scalar_ = integers ? 3.0 : 1.75;  // scalars the integer kernels represent exactly
    alpha_ = integers ? 2.0 : 0.5;
  }

  void prepare(const std::string& variant) override {
    fn_ = supported_variant(table_, variant, p_).fn;
    name_ = variant;
    out_ = is_floating(p_.dtype) ? nan_tensor(out_shape_, p_.dtype, p_.device)
                                 : filled_tensor(out_shape_, kIntSentinel, p_.dtype, p_.device);
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
      ref_ = nan_tensor(out_shape_, DType::f64, Device::cpu());
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
  Shape out_shape_;
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
    for (int o = 0; o < kEwOpCount; ++o) {
      const auto op = static_cast<EwOp>(o);
      for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::i64}) {
        if (!is_floating(dtype) && !ew_allows_integers(op)) continue;
        std::vector<std::pair<std::int64_t, bool>> sizes = {{7, true}, {40000, true}, {300, false}};
        for (const auto& l : layouts()) sizes.emplace_back(shape_numel(l.out), false);
        for (const auto& [numel, contiguous] : sizes) {
          ElementwiseProblem p;
          p.op = op;
          p.dtype = dtype;
          p.numel = numel;
          p.contiguous = contiguous;
          const std::string layout = contiguous ? "" : std::string(layout_of(numel).name) + ": ";
          out.push_back({layout + p.repr(), p});
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
    return every_pair(*this, group, device);
  }
};

}  // namespace

std::unique_ptr<OpDriver> make_elementwise_driver() {
  return std::make_unique<ElementwiseDriver>();
}

}  // namespace anvil::harness
