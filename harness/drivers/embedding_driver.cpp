// SPDX-License-Identifier: Apache-2.0
// The embedding driver (Note [Op drivers]): each variant called directly on its EmbeddingArgs
// over dense buffers. Unlike the other drivers, ref runs in the problem's dtype (on the host):
// the forward copies rows and the backward sums each id's rows in increasing position, so every
// variant must give ref's bits, and give them again on a second run (check() reruns the
// variant: the table promises a deterministic backward). Ids are skewed towards small ones (many
// repeats, some rows never named); the output starts as NaN, so an element left unwritten (an
// unnamed row of the gradient) shows.
// Group "skewed": tables from 1 x 1 to 1000 x 40 (widths off multiples of 32, more ids than
// rows and fewer), f32 and f64 values, i32 and i64 ids. Passes: forward and backward.
#include <functional>

#include "engine/core/random.h"
#include "engine/dispatch/embedding_problem.h"
#include "harness/drivers/driver_kit.h"
#include "harness/drivers/drivers.h"

namespace anvil::harness {
namespace {

class EmbeddingCase final : public OpCase {
 public:
  EmbeddingCase(const EmbeddingTable& table, const EmbeddingProblem& p, std::uint64_t seed)
      : table_(table), p_(p) {
    Generator gen(seed);
    const Tensor ids = skewed_ids(p.n, p.rows, p.index_dtype, seed);
    const Tensor w = uniform({p.rows, p.dim}, -1, 1, p.dtype, &gen);
    const Tensor dy = uniform({p.n, p.dim}, -1, 1, p.dtype, &gen);
    ids_ = {placed_on(ids, p.device), ids};
    src_ = p.pass == EmbeddingPass::forward ? Operand{placed_on(w, p.device), w}
                                            : Operand{placed_on(dy, p.device), dy};
  }

  void prepare(const std::string& variant) override {
    fn_ = supported_variant(table_, variant, p_).fn;
    name_ = variant;
    out_ = nan_tensor(out_shape(), p_.dtype, p_.device);
  }
  void run() override {
    ANVIL_CHECK(fn_ != nullptr, "embedding", "run() before prepare()");
    fn_(args(p_, ids_.dev, src_.dev, out_));
  }
  std::string check() override {
    if (!ref_.defined()) {
      EmbeddingProblem pr = p_;
      pr.device = Device::cpu();
      ref_ = nan_tensor(out_shape(), p_.dtype, Device::cpu());
      supported_variant(table_, "ref", pr).fn(args(pr, ids_.f64, src_.f64, ref_));
    }
    if (!out_.defined()) return "no output: prepare() did not complete; ";
    const char* what = p_.pass == EmbeddingPass::forward ? "out" : "grad";
    std::string bad = compare_bits(what, out_, ref_);
    const Tensor first = out_.clone();
    out_ = nan_tensor(out_shape(), p_.dtype, p_.device);
    run();
    if (!compare_bits(what, out_, first).empty())
      bad += std::string(what) + ": a second run gave other bits; ";
    return bad;
  }

 private:
  Shape out_shape() const {
    return p_.pass == EmbeddingPass::forward ? Shape{p_.n, p_.dim} : Shape{p_.rows, p_.dim};
  }
  static EmbeddingArgs args(const EmbeddingProblem& p, const Tensor& ids, const Tensor& src,
                            const Tensor& out) {
    EmbeddingArgs a;
    a.problem = p;
    a.ids = ids.data_ptr();
    if (p.pass == EmbeddingPass::forward) {
      a.weight = src.data_ptr();
      a.out = out.data_ptr();
    } else {
      a.dy = src.data_ptr();
      a.grad = out.data_ptr();
    }
    return a;
  }

  const EmbeddingTable& table_;
  EmbeddingProblem p_;
  Operand ids_, src_;  // `f64` holds the host copy in the problem's own dtype
  std::function<void(const EmbeddingArgs&)> fn_;
  std::string name_;
  Tensor out_, ref_;
};

class EmbeddingDriver final : public TableDriver<EmbeddingProblem, EmbeddingTable> {
 public:
  EmbeddingDriver() : TableDriver(embedding_table()) {}

  std::vector<std::string> groups() const override { return {"skewed"}; }

  std::vector<nn::NamedProblem> group(const std::string& name) const override {
    ANVIL_CHECK(name == "skewed", "embedding driver", "no problem group '", name,
                "' (expected skewed)");
    const std::int64_t sizes[][3] = {{1, 1, 1},      {10, 4, 7},   {33, 17, 65},
                                     {100, 1, 300},  {7, 129, 31}, {1000, 40, 10},
                                     {50, 200, 500}, {3, 5, 1}};  // rows, dim, ids
    std::vector<nn::NamedProblem> out;
    for (DType dtype : {DType::f32, DType::f64})
      for (DType ids : {DType::i32, DType::i64})
        for (const auto& s : sizes) {
          const EmbeddingProblem p{
              EmbeddingPass::forward, dtype, ids, Device::cpu(), s[0], s[1], s[2]};
          out.push_back({p.repr(), p});
        }
    return out;
  }

  std::vector<OpProblem> passes(const OpProblem& problem) const override {
    EmbeddingProblem p = std::get<EmbeddingProblem>(problem);
    p.pass = EmbeddingPass::forward;
    EmbeddingProblem b = p;
    b.pass = EmbeddingPass::backward;
    return {p, b};
  }

  std::unique_ptr<OpCase> make_case(const OpProblem& p, std::uint64_t seed) const override {
    return std::make_unique<EmbeddingCase>(table_, std::get<EmbeddingProblem>(p), seed);
  }

  // Bit for bit: see the top of the file.
  double tolerance(const std::string&, DType) const override { return 0.0; }

  // The backward's adds (the forward only copies); the ids, the rows read and the rows written,
  // once each (the backward writes the whole gradient table).
  double flops(const OpProblem& p) const override {
    const EmbeddingProblem& q = std::get<EmbeddingProblem>(p);
    return q.pass == EmbeddingPass::backward ? static_cast<double>(q.n * q.dim) : 0.0;
  }
  double bytes(const OpProblem& p) const override {
    const EmbeddingProblem& q = std::get<EmbeddingProblem>(p);
    const double e = static_cast<double>(dtype_size(q.dtype));
    const double moved = static_cast<double>(q.n * q.dim) * e;
    const double ids = static_cast<double>(q.n) * static_cast<double>(dtype_size(q.index_dtype));
    const double table =
        q.pass == EmbeddingPass::forward ? moved : static_cast<double>(q.rows * q.dim) * e;
    return ids + moved + table;
  }

  // Every CPU variant runs every problem and pass.
  int minimum_problems(const std::string& group, DeviceType device) const override {
    return every_pair(*this, group, device);
  }
};

}  // namespace

std::unique_ptr<OpDriver> make_embedding_driver() { return std::make_unique<EmbeddingDriver>(); }

}  // namespace anvil::harness
