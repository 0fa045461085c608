// SPDX-License-Identifier: Apache-2.0
// The drivers of the four optimizer tables, sgd_update, adam_update, grad_norm and grad_scale
// (Note [Op drivers]): each variant called directly on its OptimizerArgs over a list of
// `tensors` dense tensors holding `numel` elements together, against `ref` in f64 on the host.
// A problem names only the list's length and total, so the driver splits it: from the last
// tensor down, each takes the larger half of what is left and the first the rest (t4n2: 0, 0, 1,
// 1 elements; t2n32767: 16383, 16384). prepare() copies the starting parameters, gradients and
// states, so each variant starts from the same values; run() is one step:
//   sgd_update   lr 0.05, weight decay 0.01; with momentum 0.9, dampening 0.1, blending a
//                buffer that exists (the creation step is tests/test_optimizer_variants.cpp's)
//   adam_update  lr 0.01, betas 0.9 and 0.999, weight decay 0.01 (L2, or AdamW's decoupled
//                decay where the problem says so), the corrections of step 3
//   grad_norm    the squared norm into a host double
//   grad_scale   the gradients times 0.37
// Group "lists": one element, empty tensors, tensors either side of the CUDA chunk (16384), a
// long list, in f32 and f64 (sgd_update: with and without momentum; adam_update: Adam and
// AdamW).
#include <cmath>
#include <functional>
#include <sstream>

#include "engine/core/random.h"
#include "engine/dispatch/optimizer_problem.h"
#include "harness/drivers/driver_kit.h"
#include "harness/drivers/drivers.h"

namespace anvil::harness {
namespace {

constexpr double kGradScale = 0.37;

// The sizes of the list's tensors (see the top of the file).
std::vector<std::int64_t> split(std::int64_t tensors, std::int64_t numel) {
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(std::max<std::int64_t>(tensors, 0)));
  std::int64_t left = numel;
  for (std::size_t i = sizes.size(); i-- > 1;) {
    sizes[i] = left - left / 2;
    left /= 2;
  }
  if (!sizes.empty()) sizes[0] = left;
  return sizes;
}

// Parameters, gradients and two states per tensor.
struct Lists {
  std::vector<Tensor> p, g, s1, s2;
  Lists copy() const {
    Lists c;
    for (std::size_t i = 0; i < p.size(); ++i) {
      c.p.push_back(p[i].clone());
      c.g.push_back(g[i].clone());
      c.s1.push_back(s1[i].clone());
      c.s2.push_back(s2[i].clone());
    }
    return c;
  }
  std::vector<OptimTensor> entries(bool with_state1) const {
    std::vector<OptimTensor> e;
    for (std::size_t i = 0; i < p.size(); ++i)
      e.push_back({p[i].data_ptr(), g[i].data_ptr(), with_state1 ? s1[i].data_ptr() : nullptr,
                   s2[i].data_ptr(), p[i].numel(), /*first=*/false});
    return e;
  }
};

class OptimizerCase final : public OpCase {
 public:
  OptimizerCase(const OptimizerTable& table, const OptimizerProblem& p, std::uint64_t seed,
                std::function<double(const std::string&)> bound)
      : table_(table), p_(p), bound_(std::move(bound)) {
    Generator gen(seed);
    for (std::int64_t n : split(p.tensors, p.numel)) {
      // Adam's v (state 2) must be >= 0.
      const Operand ops[4] = {uniform_operand({n}, -1, 1, p.dtype, p.device, gen),
                              uniform_operand({n}, -1, 1, p.dtype, p.device, gen),
                              uniform_operand({n}, -0.1, 0.1, p.dtype, p.device, gen),
                              uniform_operand({n}, 0, 0.1, p.dtype, p.device, gen)};
      for (int k = 0; k < 4; ++k) {
        lists(start_, k).push_back(ops[k].dev);
        lists(host_, k).push_back(ops[k].f64);
      }
    }
  }

  void prepare(const std::string& variant) override {
    fn_ = supported_variant(table_, variant, p_).fn;
    name_ = variant;
    got_ = start_.copy();
    norm_ = std::nan("");
  }
  void run() override {
    ANVIL_CHECK(fn_ != nullptr, table_.op().c_str(), "run() before prepare()");
    const auto e = got_.entries(uses_state1());
    fn_(args(p_, e, &norm_));
  }
  std::string check() override {
    if (ref_.p.size() != host_.p.size()) {
      OptimizerProblem pr = p_;
      pr.dtype = DType::f64;
      pr.device = Device::cpu();
      ref_ = host_.copy();
      const auto e = ref_.entries(uses_state1());
      supported_variant(table_, "ref", pr).fn(args(pr, e, &ref_norm_));
    }
    if (got_.p.size() != ref_.p.size()) return "no output: prepare() did not complete; ";
    const double bound = bound_(name_);
    if (p_.op == OptimOp::grad_norm) {
      // A sum of numel squares.
      const double scale = std::max(1.0, std::fabs(ref_norm_));
      const double err = std::fabs(norm_ - ref_norm_) / scale;
      if (err <= bound * std::sqrt(std::max<double>(1.0, double(p_.numel)))) return {};
      std::ostringstream os;
      os.precision(17);
      os << "squared norm " << norm_ << ", ref " << ref_norm_ << "; ";
      return os.str();
    }
    std::string bad;
    for (std::size_t i = 0; i < ref_.p.size() && bad.empty(); ++i) {
      const std::string at = " of tensor " + std::to_string(i);
      bad += compare_scaled("param" + at, got_.p[i], ref_.p[i], bound) +
             compare_scaled("grad" + at, got_.g[i], ref_.g[i], bound) +
             compare_scaled("state1" + at, got_.s1[i], ref_.s1[i], bound) +
             compare_scaled("state2" + at, got_.s2[i], ref_.s2[i], bound);
    }
    return bad;
  }

 private:
  // SGD without momentum has no buffer (a null state1); the others read their states.
  bool uses_state1() const { return p_.op != OptimOp::sgd || p_.momentum; }
  static std::vector<Tensor>& lists(Lists& l, int k) {
    return k == 0 ? l.p : k == 1 ? l.g : k == 2 ? l.s1 : l.s2;
  }
  static OptimizerArgs args(const OptimizerProblem& p, const std::vector<OptimTensor>& e,
                            double* norm) {
    OptimizerArgs a;
    a.problem = p;
    a.tensors = e.data();
    a.sgd = p.momentum ? SgdHyper{0.05, 0.9, 0.1, 0.01, false} : SgdHyper{0.05, 0.0, 0.0, 0.01};
    a.adam = AdamHyper{1e-2, 0.9, 0.999, 1e-8, 0.01, 1 - std::pow(0.9, 3), 1 - std::pow(0.999, 3)};
    a.scale = kGradScale;
    a.result = norm;
    return a;
  }

  const OptimizerTable& table_;
  OptimizerProblem p_;
  std::function<double(const std::string&)> bound_;
  Lists start_, host_, got_, ref_;
  double norm_ = 0.0, ref_norm_ = 0.0;
  std::function<void(const OptimizerArgs&)> fn_;
  std::string name_;
};

class OptimizerDriver final : public TableDriver<OptimizerProblem, OptimizerTable> {
 public:
  explicit OptimizerDriver(OptimOp op) : TableDriver(optimizer_table(op)), op_(op) {}

  std::vector<std::string> groups() const override { return {"lists"}; }

  std::vector<nn::NamedProblem> group(const std::string& name) const override {
    ANVIL_CHECK(name == "lists", table_.op().c_str(), "driver: no problem group '", name,
                "' (expected lists)");
    const std::int64_t lists[][2] = {{1, 1},     {3, 4},     {4, 2},
                                     {2, 32767}, {2, 32768}, {7, 103776}};  // tensors, numel
    std::vector<nn::NamedProblem> out;
    for (DType dtype : {DType::f32, DType::f64})
      for (const auto& l : lists)
        for (bool flag : {false, true}) {  // sgd: momentum; adam: AdamW's decoupled decay
          if (flag && op_ != OptimOp::sgd && op_ != OptimOp::adam) continue;
          const bool sgd = op_ == OptimOp::sgd;
          const OptimizerProblem p{op_,  dtype,       Device::cpu(), l[0],
                                   l[1], sgd && flag, !sgd && flag};
          out.push_back({p.repr(), p});
        }
    return out;
  }

  std::vector<OpProblem> passes(const OpProblem& p) const override { return {p}; }

  std::unique_ptr<OpCase> make_case(const OpProblem& p, std::uint64_t seed) const override {
    const OptimizerProblem& q = std::get<OptimizerProblem>(p);
    return std::make_unique<OptimizerCase>(table_, q, seed, bound_of(q.dtype));
  }

  // A few roundings per element (Adam's square root and division).
  double tolerance(const std::string& variant, DType dtype) const override {
    return 8.0 * rounding_of(variant, dtype);
  }

  // Per parameter element: sgd a decay and an update (2), with momentum the blend too (4); adam
  // the decay, two blends, a square root, a division and the update (about 10); grad_norm a
  // multiply-add (2); grad_scale a multiply (1). Bytes: OptimizerProblem::bytes().
  double flops(const OpProblem& p) const override {
    const OptimizerProblem& q = std::get<OptimizerProblem>(p);
    const double per = q.op == OptimOp::sgd         ? (q.momentum ? 4.0 : 2.0)
                       : q.op == OptimOp::adam      ? 10.0
                       : q.op == OptimOp::grad_norm ? 2.0
                                                    : 1.0;
    return per * static_cast<double>(q.numel);
  }

  // Every CPU variant runs every problem.
  int minimum_problems(const std::string& group, DeviceType device) const override {
    return every_pair(*this, group, device);
  }

 private:
  OptimOp op_;
};

}  // namespace

std::unique_ptr<OpDriver> make_optimizer_driver(OptimOp op) {
  return std::make_unique<OptimizerDriver>(op);
}

}  // namespace anvil::harness
