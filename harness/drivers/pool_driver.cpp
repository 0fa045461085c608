// SPDX-License-Identifier: Apache-2.0
// The drivers of the three pooling tables, max_pool2d, avg_pool2d and adaptive_avg_pool2d
// (Note [Op drivers]): each variant run through the op layer (engine/ops/pool.h) while forced by
// name, as the autograd functions call it; a backward pass reads the training forward of the
// same variant (max pooling's workspace), run by prepare(). Max-pooling inputs have no ties
// inside a window (distinct_operand), so every variant routes the gradient to the same element.
// Groups: "odd" (odd and rectangular windows, strides and padding, ceil mode with and without a
// dropped last window, a window as large as the input, a 1x1 input; avg pooling with padding
// counted and excluded; adaptive: odd, upsampling and divisible sizes) and "layers" (the models'
// pooling layers at batch 1-2: AlexNet, the ResNet-50 stem, VGG16, cnn_mnist, a CIFAR-style
// ceil-mode pool; adaptive: ResNet-50's global pool, VGG16's 7x7 on 7x7 and on 1x1 inputs) and
// "half" (both of them in bf16 and in f16, for the 16-bit variants: Note [Half pool tolerance]).
//
// Note [Half pool tolerance]
// A 16-bit case's inputs are bf16/f16 values (max pooling: distinct ones, see half_distinct()),
// read exactly by ref in f64. A maximum is one of them (exact); an average, and a backward
// element (the sum of the few gradients routed to it, or of its windows' shares), is summed in
// f32, with an error far below the 16-bit unit roundoff u (2^-8 bf16, 2^-11 f16) at these
// window sizes, and rounded once: off by at most u * |ref|. The bound is 2u, room for a kernel
// that rounds a partial sum once more (oneDNN's bf16 backward may); a variant that skips the
// rounding is exact, one that reads the wrong element or window is off by order 1.
#include <cmath>
#include <functional>

#include "engine/core/views.h"
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
    if (p.kind != PoolKind::max)
      x_ = uniform_operand({p.n, p.c, p.h, p.w}, -1, 1, p.dtype, p.device, gen);
    else if (is_half(p.dtype))
      x_ = half_distinct(p, seed);
    else
      x_ = distinct_operand({p.n, p.c, p.h, p.w}, p.dtype, p.device, seed);
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
    else {
      const ops::PoolForward f =
          ops::pool2d_forward(x_.dev, p_, p_.pass == PoolPass::forward_training);
      out_ = f.y;
      ran_ = f.variant;
      workspace_ = f.workspace.defined();
    }
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
    std::string bad;
    if (p_.pass != PoolPass::backward && ran_ != name_)
      bad += "ran " + ran_ + " when " + name_ + " was forced; ";
    if (p_.kind == PoolKind::max && p_.pass == PoolPass::forward_training && !workspace_)
      bad += "no max-pooling workspace after a training forward; ";
    // A window sums at most kh*kw values (an adaptive one up to the input size), a backward
    // element as many windows: a few roundings.
    return bad +
           compare_scaled(p_.pass == PoolPass::backward ? "dx" : "y", out_, ref_, bound_(name_));
  }

 private:
  // Max-pooling inputs for a 16-bit problem: multiples of 2^-(bits-1) in [-1, 1), bits = 8 (bf16)
  // or 11 (f16) significant bits, so each is exact in the type. An odd multiplier permutes the
  // residues mod 2^bits, so any 2^bits consecutive elements differ; every window of the groups
  // spans fewer (checked), so no window holds a tie and every variant routes each gradient to
  // the same element.
  static Operand half_distinct(const PoolProblem& p, std::uint64_t seed) {
    const int bits = p.dtype == DType::bf16 ? 8 : 11;
    const std::int64_t values = std::int64_t{1} << bits;
    ANVIL_CHECK((p.kh - 1) * p.w + p.kw <= values, pool_op_name(p.kind), "driver: a ", p.kh, "x",
                p.kw, " window over rows of ", p.w, " spans more than ", values,
                " elements, so its ", dtype_name(p.dtype), " inputs could tie");
    Tensor t = Tensor::empty({p.n, p.c, p.h, p.w}, DType::f64);
    double* d = t.data<double>();
    const auto mask = static_cast<std::uint64_t>(values - 1);
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      const std::uint64_t k = ((static_cast<std::uint64_t>(i) + seed) * 2654435761ULL) & mask;
      d[i] = std::ldexp(static_cast<double>(k), 1 - bits) - 1.0;
    }
    return {placed_on(raw::to_dtype(t, p.dtype), p.device), t};
  }

  const PoolTable& table_;
  PoolProblem p_;
  std::function<double(const std::string&)> bound_;
  Operand x_, dy_;
  std::string name_, ran_;
  bool workspace_ = false;
  ops::PoolForward fwd_;
  Tensor out_, ref_;
};

class PoolDriver final : public TableDriver<PoolProblem, PoolTable> {
 public:
  explicit PoolDriver(PoolKind kind) : TableDriver(pool_table(kind)), kind_(kind) {}

  std::vector<std::string> groups() const override { return {"odd", "layers", "half"}; }

  std::vector<nn::NamedProblem> group(const std::string& name) const override {
    ANVIL_CHECK(name == "odd" || name == "layers" || name == "half", table_.op().c_str(),
                "driver: no problem group '", name, "' (expected odd, layers or half)");
    if (name == "half") {  // Note [Half pool tolerance]
      std::vector<nn::NamedProblem> out;
      for (const char* type : {"bf16", "f16"})
        for (const char* g : {"odd", "layers"})
          for (const auto& np : group(g)) {
            const std::string d = np.name + ":" + type;
            out.push_back({d, parse_problem(table_.op(), d)});
          }
      return out;
    }
    const bool odd = name == "odd";
    std::vector<std::string> descriptors;
    if (kind_ == PoolKind::adaptive_avg) {
      descriptors =
          odd ? std::vector<std::string>{"mb2ic3ih7iw9oh3ow4", "mb1ic2ih2iw3oh5ow7",
                                         "mb2ic3ih10iw8oh5ow4"}
              : std::vector<std::string>{"mb2ic2048ih7oh1", "mb2ic512ih7oh7", "mb2ic512ih1oh7"};
    } else if (odd) {
      descriptors = {"mb2ic3ih7iw9kh3sh2ph1:ceil",
                     "mb1ic2ih5kh2ph1:ceil",
                     "mb2ic3ih6iw7kh3sh1ph1",
                     "mb1ic2ih4kh4",
                     "mb2ic2ih9iw7kh3kw2sh2sw1ph1pw0:ceil",
                     "mb3ic2ih1kh1"};
    } else {
      descriptors = {"mb2ic256ih13kh3sh2", "mb2ic64ih112kh3sh2ph1", "mb2ic64ih33kh2:ceil"};
      if (kind_ == PoolKind::max)  // the max-only layers
        for (const char* d : {"mb2ic96ih55kh3sh2", "mb2ic256ih27kh3sh2", "mb1ic64ih224kh2",
                              "mb2ic512ih14kh2", "mb2ic64ih24kh2"})
          descriptors.emplace_back(d);
    }
    if (kind_ == PoolKind::avg)  // each also with the padding excluded from the count
      for (std::size_t i = 0, n = descriptors.size(); i < n; ++i)
        descriptors.push_back(descriptors[i] + ":exclude_pad");
    std::vector<nn::NamedProblem> out;
    out.reserve(descriptors.size());
    for (const auto& d : descriptors) out.push_back({d, parse_problem(table_.op(), d)});
    return out;
  }

  // The inference and training forwards (max pooling keeps its workspace in the latter) and
  // the backward of the training forward.
  std::vector<OpProblem> passes(const OpProblem& problem) const override {
    const PoolProblem& p = std::get<PoolProblem>(problem);
    return {p.with_pass(PoolPass::forward_inference), p.with_pass(PoolPass::forward_training),
            p.with_pass(PoolPass::backward)};
  }

  std::unique_ptr<OpCase> make_case(const OpProblem& p, std::uint64_t seed) const override {
    const PoolProblem& q = std::get<PoolProblem>(p);
    return std::make_unique<PoolCase>(table_, q, seed, bound_of(q.dtype));
  }

  // Max pooling copies values (exact); averages sum a window: a few roundings. bf16/f16: twice
  // the type's unit roundoff (Note [Half pool tolerance]).
  double tolerance(const std::string& variant, DType dtype) const override {
    if (dtype == DType::bf16) return 2.0 * std::ldexp(1.0, -8);
    if (dtype == DType::f16) return 2.0 * std::ldexp(1.0, -11);
    return (kind_ == PoolKind::max ? 1.0 : 64.0) * rounding_of(variant, dtype);
  }

  // oneDNN declines ceil-mode windows that run past the input (avg: where the padding is
  // counted) and adaptive sizes that do not divide the input. At least three problems of each
  // max/avg group remain, one adaptive odd problem (10x8 -> 5x4) and two adaptive layers, each
  // with its three passes.
  // The half group: each 16-bit variant runs at least three problems of its type, two for
  // adaptive pooling (oneDNN's JIT bf16 pooling takes the two divisible layers, 7 -> 1 and
  // 7 -> 7, and none of the odd problems, of 2-3 channels: Note [oneDNN bf16 pooling]).
  int minimum_problems(const std::string& group, DeviceType device) const override {
    if (device == DeviceType::cuda) return kCudaMinimumPairs;
    if (group == "half") return (kind_ == PoolKind::adaptive_avg ? 2 : 3) * 3;
    if (kind_ != PoolKind::adaptive_avg) return 3 * 3;
    return (group == "odd" ? 1 : 2) * 3;
  }

 private:
  PoolKind kind_;
};

}  // namespace

std::unique_ptr<OpDriver> make_pool_driver(PoolKind kind) {
  return std::make_unique<PoolDriver>(kind);
}

}  // namespace anvil::harness
