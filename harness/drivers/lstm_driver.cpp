// SPDX-License-Identifier: Apache-2.0
// The lstm driver (Note [Op drivers]): each variant run through the op layer's
// lstm_forward/lstm_backward (engine/ops/lstm.h) by name; a backward pass reads the training
// forward of the same variant (its saved state, Note [LSTM saved state]), run by prepare().
// The backward gets dy, dh_n and dc_n, so every output's gradient path is exercised.
// Group "odd": one step, odd sizes, PyTorch's two biases, a given initial state, a batch of 128,
// and I and H >= 128 (cpu.fused then computes weight gradients transposed, Note [Transposed
// weight gradients]).
#include <cmath>
#include <functional>

#include "engine/dispatch/lstm_problem.h"
#include "engine/ops/lstm.h"
#include "harness/drivers/driver_kit.h"
#include "harness/drivers/drivers.h"
#include "harness/problem_descriptor.h"

namespace anvil::harness {
namespace {

class LstmCase final : public OpCase {
 public:
  LstmCase(const LstmTable& table, const LstmProblem& p, std::uint64_t seed,
           std::function<double(const std::string&)> bound)
      : table_(table), p_(p), bound_(std::move(bound)) {
    Generator gen(seed);
    const double k = 1.0 / std::sqrt(static_cast<double>(std::max<std::int64_t>(p.H, 1)));
    auto operand = [&](const Shape& s, double a) {
      return uniform_operand(s, -a, a, p.dtype, p.device, gen);
    };
    const Operand none;
    x_ = operand({p.T, p.B, p.I}, 1.0);
    h0_ = p.has_initial_state ? operand({p.B, p.H}, 0.5) : none;
    c0_ = p.has_initial_state ? operand({p.B, p.H}, 0.5) : none;
    w_ih_ = operand({4 * p.H, p.I}, 2 * k);
    w_hh_ = operand({4 * p.H, p.H}, 2 * k);
    b_ih_ = operand({4 * p.H}, k);
    b_hh_ = p.two_biases ? operand({4 * p.H}, k) : none;
    dy_ = operand({p.T, p.B, p.H}, 1.0);
    dh_n_ = operand({p.B, p.H}, 1.0);
    dc_n_ = operand({p.B, p.H}, 1.0);
  }

  void prepare(const std::string& variant) override {
    v_ = &supported_variant(table_, variant, p_);
    if (p_.pass == LstmPass::backward) {
      LstmProblem pf = p_;
      pf.pass = LstmPass::forward_training;
      supported_variant(table_, variant, pf);
      fwd_ = ops::lstm_forward(*v_, inputs(false), true);
    }
    out_.clear();
  }
  void run() override {
    ANVIL_CHECK(v_ != nullptr, "lstm", "run() before prepare()");
    out_ = results(*v_, false, fwd_);
  }
  std::string check() override {
    if (ref_.empty()) {
      const auto& ref = supported_variant(table_, "ref", on_host());
      ops::LstmForwardResult rf;
      if (p_.pass == LstmPass::backward) rf = ops::lstm_forward(ref, inputs(true), true);
      ref_ = results(ref, true, rf);
    }
    if (out_.empty()) return "no output: run() did not complete; ";
    // Gradients of the weights sum T*B products, the recurrence carries over T steps.
    const double bound =
        bound_(v_->name) * std::sqrt(static_cast<double>(p_.T * (p_.B + p_.I + p_.H)));
    std::string bad;
    for (std::size_t i = 0; i < out_.size(); ++i)
      if (ref_[i].second.defined())
        bad += out_[i].second.defined()
                   ? compare_scaled(out_[i].first, out_[i].second, ref_[i].second, bound)
                   : out_[i].first + ": not computed; ";
    return bad;
  }

 private:
  using Named = std::vector<std::pair<std::string, Tensor>>;
  LstmProblem on_host() const {
    LstmProblem p = p_;
    p.dtype = DType::f64;
    p.device = Device::cpu();
    return p;
  }
  ops::LstmInputs inputs(bool f64) const {
    auto t = [f64](const Operand& o) { return f64 ? o.f64 : o.dev; };
    return {t(x_), t(h0_), t(c0_), t(w_ih_), t(w_hh_), t(b_ih_), t(b_hh_)};
  }
  // The pass's outputs under `v` (on the f64 host copies for ref).
  Named results(const LstmTable::Variant& v, bool f64, const ops::LstmForwardResult& fwd) const {
    const ops::LstmInputs in = inputs(f64);
    if (p_.pass != LstmPass::backward) {
      const auto r = ops::lstm_forward(v, in, p_.pass == LstmPass::forward_training);
      return {{"y", r.y}, {"h_n", r.h_n}, {"c_n", r.c_n}};
    }
    auto t = [f64](const Operand& o) { return f64 ? o.f64 : o.dev; };
    const auto g = ops::lstm_backward(v, in, fwd, t(dy_), t(dh_n_), t(dc_n_));
    return {{"dx", g.dx},       {"dh0", g.dh0},     {"dc0", g.dc0},    {"dw_ih", g.dw_ih},
            {"dw_hh", g.dw_hh}, {"db_ih", g.db_ih}, {"db_hh", g.db_hh}};
  }

  const LstmTable& table_;
  LstmProblem p_;
  std::function<double(const std::string&)> bound_;
  Operand x_, h0_, c0_, w_ih_, w_hh_, b_ih_, b_hh_, dy_, dh_n_, dc_n_;
  const LstmTable::Variant* v_ = nullptr;
  ops::LstmForwardResult fwd_;
  Named out_, ref_;
};

class LstmDriver final : public TableDriver<LstmProblem, LstmTable> {
 public:
  LstmDriver() : TableDriver(lstm_table()) {}

  std::vector<std::string> groups() const override { return {"odd"}; }

  std::vector<nn::NamedProblem> group(const std::string& name) const override {
    ANVIL_CHECK(name == "odd", "lstm driver", "no problem group '", name, "' (expected odd)");
    std::vector<nn::NamedProblem> out;
    for (const char* d :
         {"t5mb4ic3hc8", "t4mb3ic5hc7:state", "t6mb5ic9hc13:state:hh_bias", "t1mb1ic1hc1",
          "t7mb17ic31hc33:hh_bias", "t3mb128ic64hc64:state", "t9mb2ic40hc24:state:hh_bias",
          "t3mb5ic130hc129:state:hh_bias", "t2mb4ic160hc48"})
      out.push_back({d, parse_problem("lstm", d)});
    return out;
  }

  std::vector<OpProblem> passes(const OpProblem& problem) const override {
    std::vector<OpProblem> out;
    for (LstmPass pass :
         {LstmPass::forward_inference, LstmPass::forward_training, LstmPass::backward}) {
      LstmProblem q = std::get<LstmProblem>(problem);
      q.pass = pass;
      out.emplace_back(q);
    }
    return out;
  }

  std::unique_ptr<OpCase> make_case(const OpProblem& p, std::uint64_t seed) const override {
    const LstmProblem& q = std::get<LstmProblem>(p);
    return std::make_unique<LstmCase>(table_, q, seed, bound_of(q.dtype));
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

std::unique_ptr<OpDriver> make_lstm_driver() { return std::make_unique<LstmDriver>(); }

}  // namespace anvil::harness
