// SPDX-License-Identifier: Apache-2.0
// The drivers of the three pooling tables, max_pool2d, avg_pool2d and adaptive_avg_pool2d
// (Note [Op drivers]): each variant run through the op layer (engine/ops/pool.h) while forced by
// name, as the autograd functions call it; a backward pass reads the training forward of the
// same variant (max pooling's workspace), run by prepare(). Max-pooling inputs have no ties
// inside a window (distinct_operand), so every variant routes the gradient to the same element.
// Group "odd": odd and rectangular windows, strides and padding, ceil mode, a 1x1 input, and
// (avg) padding excluded from the count; adaptive: odd, upsampling, divisible and global sizes.
#include <functional>

#include "engine/dispatch/pool_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/ops/pool.h"
#include "harness/drivers/driver_kit.h"
#include "harness/drivers/drivers.h"
#include "harness/problem_descriptor.h"

namespace anvil::harness {
namespace {

class PoolCase final : public OpCase {
 public:
  PoolCase(const PoolTable& table, const PoolProblem& p, std::uint64_t seed,
           std::function<double(const std::string&)> bound)
      : table_(table), p_(p), bound_(std::move(bound)) {
    Generator gen(seed);
    x_ = p.kind == PoolKind::max
             ? distinct_operand({p.n, p.c, p.h, p.w}, p.dtype, p.device, seed)
             : uniform_operand({p.n, p.c, p.h, p.w}, -1, 1, p.dtype, p.device, gen);
    dy_ = uniform_operand({p.n, p.c, p.oh, p.ow}, -1, 1, p.dtype, p.device, gen);
  }

  void prepare(const std::string& variant) override {
    supported_variant(table_, variant, p_);
    name_ = variant;
    if (p_.pass == PoolPass::backward) {
      ForceVariant force(table_.op(), name_);
      fwd_ = ops::pool2d_forward(x_.dev, p_.with_pass(PoolPass::forward_training), true);
    }
    out_ = Tensor();
  }
  void run() override {
    ANVIL_CHECK(!name_.empty(), table_.op().c_str(), "run() before prepare()");
    ForceVariant force(table_.op(), name_);
    if (p_.pass == PoolPass::backward)
      out_ = ops::pool2d_backward(dy_.dev, fwd_);
    else
      out_ = ops::pool2d_forward(x_.dev, p_, p_.pass == PoolPass::forward_training).y;
  }
  std::string check() override {
    if (!ref_.defined()) {
      ForceVariant force(table_.op(), "ref");
      PoolProblem pr = p_;
      pr.dtype = DType::f64;
      pr.device = Device::cpu();
      const bool training = p_.pass != PoolPass::forward_inference;
      const ops::PoolForward rf = ops::pool2d_forward(
          x_.f64, training ? pr.with_pass(PoolPass::forward_training) : pr, training);
      ref_ = p_.pass == PoolPass::backward ? ops::pool2d_backward(dy_.f64, rf) : rf.y;
    }
    if (!out_.defined()) return "no output: run() did not complete; ";
    // A window sums at most kh*kw values (an adaptive one up to the input size), a backward
    // element as many windows: a few roundings.
    return compare_scaled(p_.pass == PoolPass::backward ? "dx" : "y", out_, ref_, bound_(name_));
  }

 private:
  const PoolTable& table_;
  PoolProblem p_;
  std::function<double(const std::string&)> bound_;
  Operand x_, dy_;
  std::string name_;
  ops::PoolForward fwd_;
  Tensor out_, ref_;
};

class PoolDriver final : public TableDriver<PoolProblem, PoolTable> {
 public:
  explicit PoolDriver(PoolKind kind) : TableDriver(pool_table(kind)), kind_(kind) {}

  std::vector<std::string> groups() const override { return {"odd"}; }

  std::vector<nn::NamedProblem> group(const std::string& name) const override {
    ANVIL_CHECK(name == "odd", table_.op().c_str(), "driver: no problem group '", name,
                "' (expected odd)");
    std::vector<std::string> descriptors;
    if (kind_ == PoolKind::adaptive_avg) {
      descriptors = {"mb2ic3ih7iw9oh3ow4", "mb1ic2ih2iw3oh5ow7", "mb2ic3ih10iw8oh5ow4",
                     "mb2ic64ih7oh1", "mb2ic16ih1oh7"};
    } else {
      descriptors = {"mb2ic3ih7iw9kh3sh2ph1", "mb2ic2ih9iw7kh3kw2sh2sw1ph1pw0:ceil",
                     "mb3ic2ih1kh1",          "mb2ic4ih8kh2",
                     "mb2ic5ih6kh3sh1ph1",    "mb2ic16ih33kh2:ceil",
                     "mb2ic8ih27kh3sh2"};
      if (kind_ == PoolKind::avg) {
        descriptors.emplace_back("mb2ic3ih7iw9kh3sh2ph1:exclude_pad");
        descriptors.emplace_back("mb2ic5ih6kh3sh1ph1:ceil:exclude_pad");
      }
    }
    std::vector<nn::NamedProblem> out;
    for (const auto& d : descriptors) out.push_back({d, parse_problem(table_.op(), d)});
    return out;
  }

  // Inference forward and backward; max pooling also its training forward (which keeps the
  // workspace its backward reads).
  std::vector<OpProblem> passes(const OpProblem& problem) const override {
    const PoolProblem& p = std::get<PoolProblem>(problem);
    std::vector<OpProblem> out{p.with_pass(PoolPass::forward_inference)};
    if (kind_ == PoolKind::max) out.emplace_back(p.with_pass(PoolPass::forward_training));
    out.emplace_back(p.with_pass(PoolPass::backward));
    return out;
  }

  std::unique_ptr<OpCase> make_case(const OpProblem& p, std::uint64_t seed) const override {
    const PoolProblem& q = std::get<PoolProblem>(p);
    return std::make_unique<PoolCase>(
        table_, q, seed, [this, dt = q.dtype](const std::string& v) { return tolerance(v, dt); });
  }

  // Max pooling copies values (exact); averages sum a window: a few roundings.
  double tolerance(const std::string& variant, DType dtype) const override {
    return (kind_ == PoolKind::max ? 1.0 : 64.0) * rounding_of(variant, dtype);
  }

  // oneDNN declines ceil-mode windows that run past the input and adaptive sizes that do not
  // divide the input: the plain-window problems (and the divisible adaptive ones) remain.
  int minimum_problems(const std::string&, DeviceType) const override {
    return kind_ == PoolKind::adaptive_avg ? 2 : 8;
  }

 private:
  PoolKind kind_;
};

}  // namespace

std::unique_ptr<OpDriver> make_pool_driver(PoolKind kind) {
  return std::make_unique<PoolDriver>(kind);
}

}  // namespace anvil::harness
