// SPDX-License-Identifier: Apache-2.0
// The batch_norm2d driver (Note [Op drivers]): each variant run through the op layer
// (engine/ops/batch_norm.h) while forced by name; a backward pass reads the forward prepare()
// ran (training, or with the running statistics for a problem marked `global`). The training
// forward updates copies of the running statistics, never the case's inputs.
// Group "odd": odd planes, one pixel per plane (after global pooling), a single image, larger
// planes; passes: training and inference forward, backward with batch and with global
// statistics.
#include <cmath>
#include <functional>

#include "engine/dispatch/batch_norm_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/ops/batch_norm.h"
#include "harness/drivers/driver_kit.h"
#include "harness/drivers/drivers.h"
#include "harness/problem_descriptor.h"

namespace anvil::harness {
namespace {

class BatchNormCase final : public OpCase {
 public:
  BatchNormCase(const BatchNormTable& table, const BatchNormProblem& p, std::uint64_t seed,
                std::function<double(const std::string&)> bound)
      : table_(table), p_(p), bound_(std::move(bound)) {
    Generator gen(seed);
    const Shape xs{p.n, p.c, p.h, p.w};
    x_ = uniform_operand(xs, -1, 3, p.dtype, p.device, gen);
    w_ = uniform_operand({p.c}, 0.5, 1.5, p.dtype, p.device, gen);
    b_ = uniform_operand({p.c}, -1, 1, p.dtype, p.device, gen);
    rm_ = uniform_operand({p.c}, -0.5, 0.5, p.dtype, p.device, gen);
    rv_ = uniform_operand({p.c}, 0.5, 2, p.dtype, p.device, gen);
    dy_ = uniform_operand(xs, -1, 1, p.dtype, p.device, gen);
  }

  void prepare(const std::string& variant) override {
    supported_variant(table_, variant, p_);
    name_ = variant;
    if (p_.pass == BatchNormPass::backward) {
      ForceVariant force("batch_norm2d", name_);
      fwd_ = forward(x_.dev, w_.dev, b_.dev, rm_.dev, rv_.dev, p_.batch_stats);
    }
    out_ = {};
  }
  void run() override {
    ANVIL_CHECK(!name_.empty(), "batch_norm2d", "run() before prepare()");
    ForceVariant force("batch_norm2d", name_);
    if (p_.pass == BatchNormPass::backward) {
      const ops::BatchNormGrads g = ops::batch_norm2d_backward(dy_.dev, x_.dev, w_.dev, fwd_);
      out_ = {g.dx, g.dweight, g.dbias};
    } else {
      const Tensor rm = rm_.dev.clone(), rv = rv_.dev.clone();
      const ops::BatchNormForward f = ops::batch_norm2d_forward(
          x_.dev, w_.dev, b_.dev, rm, rv, p_.pass == BatchNormPass::forward_training, p_.momentum,
          p_.eps);
      out_ = {f.y, f.mean, f.var, rm, rv};
    }
  }
  std::string check() override {
    if (ref_.empty()) {
      ForceVariant force("batch_norm2d", "ref");
      const bool training = p_.pass == BatchNormPass::forward_training ||
                            (p_.pass == BatchNormPass::backward && p_.batch_stats);
      const Tensor rm = rm_.f64.clone(), rv = rv_.f64.clone();
      const ops::BatchNormForward rf =
          ops::batch_norm2d_forward(x_.f64, w_.f64, b_.f64, rm, rv, training, p_.momentum, p_.eps);
      if (p_.pass == BatchNormPass::backward) {
        const ops::BatchNormGrads g = ops::batch_norm2d_backward(dy_.f64, x_.f64, w_.f64, rf);
        ref_ = {g.dx, g.dweight, g.dbias};
      } else {
        ref_ = {rf.y, rf.mean, rf.var, rm, rv};
      }
    }
    if (out_.empty()) return "no output: run() did not complete; ";
    // The statistics and the weight gradients sum N*H*W values per channel.
    const double bound = bound_(name_), sum_bound = bound * std::sqrt(double(p_.per_channel()));
    if (p_.pass == BatchNormPass::backward)
      return compare_scaled("dx", out_[0], ref_[0], sum_bound) +
             compare_scaled("dweight", out_[1], ref_[1], sum_bound) +
             compare_scaled("dbias", out_[2], ref_[2], sum_bound);
    std::string bad = compare_scaled("y", out_[0], ref_[0], sum_bound);
    if (p_.pass == BatchNormPass::forward_training)
      bad += compare_scaled("mean", out_[1], ref_[1], sum_bound) +
             compare_scaled("var", out_[2], ref_[2], sum_bound) +
             compare_scaled("running mean", out_[3], ref_[3], sum_bound) +
             compare_scaled("running var", out_[4], ref_[4], sum_bound);
    return bad;
  }

 private:
  // Running statistics are copied: a training forward updates them.
  ops::BatchNormForward forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rm,
                                const Tensor& rv, bool training) const {
    return ops::batch_norm2d_forward(x, w, b, rm.clone(), rv.clone(), training, p_.momentum,
                                     p_.eps);
  }

  const BatchNormTable& table_;
  BatchNormProblem p_;
  std::function<double(const std::string&)> bound_;
  Operand x_, w_, b_, rm_, rv_, dy_;
  std::string name_;
  ops::BatchNormForward fwd_;
  std::vector<Tensor> out_, ref_;
};

class BatchNormDriver final : public TableDriver<BatchNormProblem, BatchNormTable> {
 public:
  BatchNormDriver() : TableDriver(batch_norm2d_table()) {}

  std::vector<std::string> groups() const override { return {"odd"}; }

  std::vector<nn::NamedProblem> group(const std::string& name) const override {
    ANVIL_CHECK(name == "odd", "batch_norm2d driver", "no problem group '", name,
                "' (expected odd)");
    std::vector<nn::NamedProblem> out;
    for (const char* d :
         {"mb2ic3ih5iw7", "mb4ic5ih1", "mb1ic6ih3", "mb2ic64ih112", "mb2ic256ih56", "mb2ic2048ih7"})
      out.push_back({d, parse_problem("batch_norm2d", d)});
    return out;
  }

  std::vector<OpProblem> passes(const OpProblem& problem) const override {
    const BatchNormProblem& p = std::get<BatchNormProblem>(problem);
    BatchNormProblem global = p.with_pass(BatchNormPass::backward);
    global.batch_stats = false;
    return {p.with_pass(BatchNormPass::forward_training),
            p.with_pass(BatchNormPass::forward_inference), p.with_pass(BatchNormPass::backward),
            global};
  }

  std::unique_ptr<OpCase> make_case(const OpProblem& p, std::uint64_t seed) const override {
    const BatchNormProblem& q = std::get<BatchNormProblem>(p);
    return std::make_unique<BatchNormCase>(table_, q, seed, bound_of(q.dtype));
  }

  double tolerance(const std::string& variant, DType dtype) const override {
    return 32.0 * rounding_of(variant, dtype);
  }

  // Every variant runs every problem and pass.
  int minimum_problems(const std::string& group, DeviceType device) const override {
    return every_pair(*this, group, device);
  }
};

}  // namespace

std::unique_ptr<OpDriver> make_batch_norm_driver() { return std::make_unique<BatchNormDriver>(); }

}  // namespace anvil::harness
