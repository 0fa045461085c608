// SPDX-License-Identifier: Apache-2.0
// The reduce driver (Note [Op drivers]): each variant called directly on its ReduceArgs over a
// dense x[outer, reduce, inner], against `ref` in f64 on the host. A sum is scaled by 0.75 (a
// variant that ignores the scale fails); a max also writes its int64 index, compared exactly,
// over values without ties (distinct_operand), so the first-index rule cannot hide a wrong index.
// The outputs start as NaN (the index as -1).
// Group "shapes": one element, small odd blocks, a long row, a long column, sizes above the
// OpenMP grain, each in f32 and f64; and an empty reduced extent (the sum only: a max of
// nothing is refused). Group "dims": the [outer, reduce, inner] blocks that ops::sum, mean and
// max make of [4, 5, 6], [3, 1, 7, 2], [300, 257] and [64, 40, 33] over every set of dims, in
// f32 and f64. Passes: the sum and the max of each.
#include <array>
#include <cmath>
#include <functional>

#include "engine/dispatch/reduce_problem.h"
#include "harness/drivers/driver_kit.h"
#include "harness/drivers/drivers.h"

namespace anvil::harness {
namespace {

constexpr double kScale = 0.75;

class ReduceCase final : public OpCase {
 public:
  ReduceCase(const ReduceTable& table, const ReduceProblem& p, std::uint64_t seed,
             std::function<double(const std::string&)> bound)
      : table_(table), p_(p), bound_(std::move(bound)) {
    Generator gen(seed);
    const Shape xs{p.outer * p.reduce * p.inner};
    x_ = p.op == ReduceOp::max ? distinct_operand(xs, p.dtype, p.device, seed)
                               : uniform_operand(xs, -1, 1, p.dtype, p.device, gen);
  }

  void prepare(const std::string& variant) override {
    fn_ = supported_variant(table_, variant, p_).fn;
    name_ = variant;
    out_ = nan_tensor({p_.outer * p_.inner}, p_.dtype, p_.device);
    index_ = filled_tensor({p_.outer * p_.inner}, -1, DType::i64, p_.device);
  }
  void run() override {
    ANVIL_CHECK(fn_ != nullptr, "reduce", "run() before prepare()");
    fn_(args(p_, x_.dev, out_, index_));
  }
  std::string check() override {
    if (!ref_.defined()) {
      ReduceProblem pr = p_;
      pr.dtype = DType::f64;
      pr.device = Device::cpu();
      ref_ = nan_tensor({p_.outer * p_.inner}, DType::f64, Device::cpu());
      ref_index_ = filled_tensor({p_.outer * p_.inner}, -1, DType::i64, Device::cpu());
      supported_variant(table_, "ref", pr).fn(args(pr, x_.f64, ref_, ref_index_));
    }
    if (!out_.defined()) return "no output: prepare() did not complete; ";
    if (p_.op == ReduceOp::max)  // a max copies one value: exact
      return compare_scaled("max", out_, ref_, 0.0) + compare_bits("index", index_, ref_index_);
    return compare_scaled("sum", out_, ref_,
                          bound_(name_) * std::sqrt(std::max<double>(1.0, double(p_.reduce))));
  }

 private:
  static ReduceArgs args(const ReduceProblem& p, const Tensor& x, const Tensor& out,
                         const Tensor& index) {
    ReduceArgs a;
    a.problem = p;
    a.x = x.data_ptr();
    a.out = out.data_ptr();
    a.index = p.op == ReduceOp::max ? index.data<std::int64_t>() : nullptr;
    a.scale = p.op == ReduceOp::sum ? kScale : 1.0;
    return a;
  }

  const ReduceTable& table_;
  ReduceProblem p_;
  std::function<double(const std::string&)> bound_;
  Operand x_;
  std::function<void(const ReduceArgs&)> fn_;
  std::string name_;
  Tensor out_, index_, ref_, ref_index_;
};

class ReduceDriver final : public TableDriver<ReduceProblem, ReduceTable> {
 public:
  ReduceDriver() : TableDriver(reduce_table()) {}

  std::vector<std::string> groups() const override { return {"shapes", "dims"}; }

  std::vector<nn::NamedProblem> group(const std::string& name) const override {
    ANVIL_CHECK(name == "shapes" || name == "dims", "reduce driver", "no problem group '", name,
                "' (expected shapes or dims)");
    const std::vector<std::array<std::int64_t, 3>> shapes = {
        {1, 1, 1},     {4, 5, 6},    {3, 7, 2},     {300, 257, 1},
        {1, 257, 300}, {64, 40, 33}, {1, 40000, 1}, {2, 0, 3}};
    // Each tensor's blocks once; the kept-dims-first permutation of a split set of dims included.
    const std::vector<std::array<std::int64_t, 3>> dims = {
        {4, 5, 6},     {1, 4, 30},    {20, 6, 1},    {1, 20, 6},    {4, 30, 1},    {1, 120, 1},
        {7, 6, 1},     {5, 24, 1},    {120, 1, 1},   {3, 1, 14},    {1, 3, 14},    {3, 7, 2},
        {1, 21, 2},    {21, 2, 1},    {2, 21, 1},    {3, 14, 1},    {1, 42, 1},    {42, 1, 1},
        {300, 257, 1}, {1, 300, 257}, {1, 77100, 1}, {77100, 1, 1}, {64, 40, 33},  {1, 64, 1320},
        {2560, 33, 1}, {1, 2560, 33}, {64, 1320, 1}, {40, 2112, 1}, {1, 84480, 1}, {84480, 1, 1}};
    std::vector<nn::NamedProblem> out;
    for (DType dtype : {DType::f32, DType::f64})
      for (const auto& s : name == "shapes" ? shapes : dims) {
        ReduceProblem p;
        p.dtype = dtype;
        p.outer = s[0];
        p.reduce = s[1];
        p.inner = s[2];
        out.push_back({p.repr(), p});
      }
    return out;
  }

  // The sum, and the max where the reduced extent is not empty.
  std::vector<OpProblem> passes(const OpProblem& problem) const override {
    ReduceProblem p = std::get<ReduceProblem>(problem);
    p.op = ReduceOp::sum;
    std::vector<OpProblem> out{p};
    if (p.reduce > 0) {
      p.op = ReduceOp::max;
      out.emplace_back(p);
    }
    return out;
  }

  std::unique_ptr<OpCase> make_case(const OpProblem& p, std::uint64_t seed) const override {
    const ReduceProblem& q = std::get<ReduceProblem>(p);
    return std::make_unique<ReduceCase>(table_, q, seed, bound_of(q.dtype));
  }

  double tolerance(const std::string& variant, DType dtype) const override {
    return 4.0 * rounding_of(variant, dtype);
  }

  // One add or compare per input element; x read once, out (and max's int64 index) written once.
  double flops(const OpProblem& p) const override {
    const ReduceProblem& q = std::get<ReduceProblem>(p);
    return static_cast<double>(q.outer) * static_cast<double>(q.reduce) *
           static_cast<double>(q.inner);
  }
  double bytes(const OpProblem& p) const override {
    const ReduceProblem& q = std::get<ReduceProblem>(p);
    const double e = static_cast<double>(dtype_size(q.dtype));
    const double out = static_cast<double>(q.outer) * static_cast<double>(q.inner);
    return flops(p) * e + out * (e + (q.op == ReduceOp::max ? 8.0 : 0.0));
  }

  // Every CPU variant runs every problem and pass.
  int minimum_problems(const std::string& group, DeviceType device) const override {
    return every_pair(*this, group, device);
  }
};

}  // namespace

std::unique_ptr<OpDriver> make_reduce_driver() { return std::make_unique<ReduceDriver>(); }

}  // namespace anvil::harness
