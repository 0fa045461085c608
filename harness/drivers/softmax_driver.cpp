// SPDX-License-Identifier: Apache-2.0
// The softmax driver (Note [Op drivers]): each variant called directly on its SoftmaxArgs over
// dense [rows, cols] buffers, against `ref` in f64 on the host. Inputs by op: logits in
// [-6, 6); for the backward forms y in (0, 1) (softmax) or in [-6, 0) (log-softmax) and dy in
// [-1, 1); class ids skewed towards small ones (repeats, unused classes); the cross-entropy
// backward reads the log-sum-exp that ref's forward gives in f64, rounded to the dtype, and a
// scale of 0.25. The forward with gradient writes a separate gradient buffer and the column
// sums. Every output starts as NaN.
// Group "shapes": one element, small odd rows, long rows around the 16-lane vectors and the
// 1024-element chunks (1025, 1500, 2049), many short rows (a [4, 3, 10] tensor's 12 rows), each
// with every op in f32 and f64 (the cross-entropy ops with i32 and i64 class ids).
#include <cmath>
#include <functional>

#include "engine/core/views.h"
#include "engine/dispatch/softmax_problem.h"
#include "harness/drivers/driver_kit.h"
#include "harness/drivers/drivers.h"

namespace anvil::harness {
namespace {

constexpr int kSoftmaxOps = static_cast<int>(SoftmaxOp::cross_entropy_forward_grad) + 1;
constexpr double kScale = 0.25;

// The inputs and the outputs of one run: on the problem's device, or ref's on the host.
struct Inputs {
  Tensor x, dy, target, lse;
};
struct Buffers {
  Tensor out, lse, grad, col_sums;
};

class SoftmaxCase final : public OpCase {
 public:
  SoftmaxCase(const SoftmaxTable& table, const SoftmaxProblem& p, std::uint64_t seed,
              std::function<double(const std::string&)> bound)
      : table_(table), p_(p), bound_(std::move(bound)) {
    Generator gen(seed);
    const Shape rc{p.rows, p.cols};
    const bool ce = softmax_is_cross_entropy(p.op);
    if (p.op == SoftmaxOp::softmax_backward)
      x_ = uniform_operand(rc, 0, 1, p.dtype, p.device, gen);
    else if (p.op == SoftmaxOp::log_softmax_backward)
      x_ = uniform_operand(rc, -6, 0, p.dtype, p.device, gen);
    else
      x_ = uniform_operand(rc, -6, 6, p.dtype, p.device, gen);
    dy_ = uniform_operand(rc, -1, 1, p.dtype, p.device, gen);
    if (ce && p.cols > 0) {
      const Tensor ids = skewed_ids(p.rows, p.cols, p.index_dtype, seed);
      target_ = {placed_on(ids, p.device), ids};
    }
    if (p.op == SoftmaxOp::cross_entropy_backward) {
      SoftmaxProblem fwd = host_f64(p);
      fwd.op = SoftmaxOp::cross_entropy_forward;
      Buffers b = buffers(fwd, Device::cpu());
      supported_variant(table_, "ref", fwd).fn(args(fwd, host_inputs(), b));
      const Tensor lse = raw::to_dtype(b.lse, p.dtype);
      lse_ = {placed_on(lse, p.device), raw::to_dtype(lse, DType::f64)};
    }
  }

  void prepare(const std::string& variant) override {
    fn_ = supported_variant(table_, variant, p_).fn;
    name_ = variant;
    got_ = buffers(p_, p_.device);
  }
  void run() override {
    ANVIL_CHECK(fn_ != nullptr, "softmax", "run() before prepare()");
    fn_(args(p_, {x_.dev, dy_.dev, target_.dev, lse_.dev}, got_));
  }
  std::string check() override {
    if (!ref_.out.defined()) {
      const SoftmaxProblem pr = host_f64(p_);
      ref_ = buffers(pr, Device::cpu());
      supported_variant(table_, "ref", pr).fn(args(pr, host_inputs(), ref_));
    }
    if (!got_.out.defined()) return "no output: prepare() did not complete; ";
    // Each output reduces a row (the column sums every row too).
    const double bound = bound_(name_) * std::sqrt(std::max<double>(1.0, double(p_.cols)));
    std::string bad = compare_scaled(
        softmax_is_cross_entropy(p_.op) && p_.op != SoftmaxOp::cross_entropy_backward ? "loss"
                                                                                      : "out",
        got_.out, ref_.out, bound);
    if (got_.lse.defined()) bad += compare_scaled("lse", got_.lse, ref_.lse, bound);
    if (got_.grad.defined()) bad += compare_scaled("grad", got_.grad, ref_.grad, bound);
    if (got_.col_sums.defined())
      bad += compare_scaled("column sums", got_.col_sums, ref_.col_sums,
                            bound * std::sqrt(std::max<double>(1.0, double(p_.rows))));
    return bad;
  }

 private:
  static SoftmaxProblem host_f64(SoftmaxProblem p) {
    p.dtype = DType::f64;
    p.device = Device::cpu();
    return p;
  }
  // The outputs op writes, NaN-filled; the others undefined.
  static Buffers buffers(const SoftmaxProblem& p, const Device& device) {
    Buffers b;
    const bool per_row =
        p.op == SoftmaxOp::cross_entropy_forward || p.op == SoftmaxOp::cross_entropy_forward_grad;
    b.out = nan_tensor(per_row ? Shape{p.rows} : Shape{p.rows, p.cols}, p.dtype, device);
    if (per_row) b.lse = nan_tensor({p.rows}, p.dtype, device);
    if (p.op == SoftmaxOp::cross_entropy_forward_grad) {
      b.grad = nan_tensor({p.rows, p.cols}, p.dtype, device);
      b.col_sums = nan_tensor({p.cols}, p.dtype, device);
    }
    return b;
  }
  Inputs host_inputs() const { return {x_.f64, dy_.f64, target_.f64, lse_.f64}; }
  static void* ptr(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
  static SoftmaxArgs args(const SoftmaxProblem& p, const Inputs& in, const Buffers& b) {
    SoftmaxArgs a;
    a.problem = p;
    a.x = ptr(in.x);
    a.dy = ptr(in.dy);
    a.target = ptr(in.target);
    a.out = b.out.data_ptr();
    // The cross-entropy backward reads the forward's lse; the forwards write it.
    a.lse = p.op == SoftmaxOp::cross_entropy_backward ? ptr(in.lse) : ptr(b.lse);
    a.scale = kScale;
    a.grad = ptr(b.grad);
    a.col_sums = ptr(b.col_sums);
    return a;
  }

  const SoftmaxTable& table_;
  SoftmaxProblem p_;
  std::function<double(const std::string&)> bound_;
  Operand x_, dy_, target_, lse_;
  std::function<void(const SoftmaxArgs&)> fn_;
  std::string name_;
  Buffers got_, ref_;
};

class SoftmaxDriver final : public TableDriver<SoftmaxProblem, SoftmaxTable> {
 public:
  SoftmaxDriver() : TableDriver(softmax_table()) {}

  std::vector<std::string> groups() const override { return {"shapes"}; }

  std::vector<nn::NamedProblem> group(const std::string& name) const override {
    ANVIL_CHECK(name == "shapes", "softmax driver", "no problem group '", name,
                "' (expected shapes)");
    const std::int64_t shapes[][2] = {{1, 1},     {1, 3},     {3, 7},    {9, 17},
                                      {12, 10},   {37, 10},   {5, 1500}, {5, 2049},
                                      {70, 1025}, {300, 129}, {64, 2000}};
    std::vector<nn::NamedProblem> out;
    for (DType dtype : {DType::f32, DType::f64})
      for (const auto& s : shapes)
        for (int o = 0; o < kSoftmaxOps; ++o) {
          const auto op = static_cast<SoftmaxOp>(o);
          for (DType ids : {DType::i64, DType::i32}) {
            if (ids == DType::i32 && !softmax_is_cross_entropy(op)) continue;
            const SoftmaxProblem p{op, dtype, ids, Device::cpu(), s[0], s[1]};
            out.push_back({p.repr(), p});
          }
        }
    return out;
  }

  std::vector<OpProblem> passes(const OpProblem& p) const override { return {p}; }

  std::unique_ptr<OpCase> make_case(const OpProblem& p, std::uint64_t seed) const override {
    const SoftmaxProblem& q = std::get<SoftmaxProblem>(p);
    return std::make_unique<SoftmaxCase>(table_, q, seed, bound_of(q.dtype));
  }

  // exp and log round a few times per element.
  double tolerance(const std::string& variant, DType dtype) const override {
    return 16.0 * rounding_of(variant, dtype);
  }

  // Per element: softmax reads x twice (max, then exp and sum) and scales (about 4 operations);
  // the backward forms a product and a fused multiply-add (3); the cross-entropy forms that
  // write a gradient also subtract the one-hot target (5).
  double flops(const OpProblem& p) const override {
    const SoftmaxProblem& q = std::get<SoftmaxProblem>(p);
    const double elems = static_cast<double>(q.rows) * static_cast<double>(q.cols);
    switch (q.op) {
      case SoftmaxOp::softmax_backward:
      case SoftmaxOp::log_softmax_backward:
        return 3.0 * elems;
      case SoftmaxOp::cross_entropy_backward:
      case SoftmaxOp::cross_entropy_forward_grad:
        return 5.0 * elems;
      default:
        return 4.0 * elems;
    }
  }
  // Each [rows, cols], [rows] and [cols] buffer the op reads or writes, once.
  double bytes(const OpProblem& p) const override {
    const SoftmaxProblem& q = std::get<SoftmaxProblem>(p);
    const double e = static_cast<double>(dtype_size(q.dtype));
    const double elems = static_cast<double>(q.rows) * static_cast<double>(q.cols) * e;
    const double rows = static_cast<double>(q.rows);
    const double target = rows * static_cast<double>(dtype_size(q.index_dtype));
    switch (q.op) {
      case SoftmaxOp::softmax:
      case SoftmaxOp::log_softmax:
        return 2.0 * elems;  // x, y
      case SoftmaxOp::softmax_backward:
      case SoftmaxOp::log_softmax_backward:
        return 3.0 * elems;  // y, dy, dx
      case SoftmaxOp::cross_entropy_forward:
        return elems + target + 2.0 * rows * e;  // logits; target, loss, lse
      case SoftmaxOp::cross_entropy_backward:
        return 2.0 * elems + target + rows * e;    // logits, dx; target, lse
      case SoftmaxOp::cross_entropy_forward_grad:  // logits, grad; target, loss, lse; col sums
        return 2.0 * elems + target + 2.0 * rows * e + static_cast<double>(q.cols) * e;
    }
    return 0.0;
  }

  // Every CPU variant runs every problem.
  int minimum_problems(const std::string& group, DeviceType device) const override {
    return every_pair(*this, group, device);
  }
};

}  // namespace

std::unique_ptr<OpDriver> make_softmax_driver() { return std::make_unique<SoftmaxDriver>(); }

}  // namespace anvil::harness
