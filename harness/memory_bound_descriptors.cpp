// SPDX-License-Identifier: Apache-2.0
// The descriptors of the memory-bound tables' problems: elementwise, reduce, softmax, embedding,
// dropout and the four optimizer tables (Note [Problem descriptors], harness/problem_descriptor.h).
#include "harness/descriptor_reader.h"

namespace anvil::harness {
namespace {

constexpr double kDefaultDropout = 0.5;

// The names of `count` enumerators, by `name_of`.
template <typename E, typename F>
std::vector<std::string_view> names(int count, F name_of) {
  std::vector<std::string_view> out;
  out.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) out.emplace_back(name_of(static_cast<E>(i)));
  return out;
}
std::string listed(const std::vector<std::string_view>& words) {
  std::string s;
  for (auto w : words) {
    if (!s.empty()) s += ' ';
    s += w;
  }
  return s;
}

constexpr int kSoftmaxOps = static_cast<int>(SoftmaxOp::cross_entropy_forward_grad) + 1;

}  // namespace

// ---- elementwise -----------------------------------------------------------------------------

std::string elementwise_descriptor(const ElementwiseProblem& p) {
  return detail::str_cat("n", p.numel, ":", ew_name(p.op), p.contiguous ? "" : ":strided") +
         common_parts(p.dtype, p.device);
}

ElementwiseProblem parse_elementwise(Reader& r) {
  const auto v = r.letters({"n"});
  const auto ops = names<EwOp>(kEwOpCount, ew_name);
  const int op = r.take_choice(ops);
  ElementwiseProblem p;
  p.contiguous = !r.take_word("strided");
  p.dtype = r.take_dtype(/*integers=*/true);
  p.device = r.take_device();
  r.finish(listed(ops) + ", strided, i32 or i64");
  if (op < 0) r.fail("missing the op (expected one of " + listed(ops) + ")");
  p.op = static_cast<EwOp>(op);
  p.numel = need(r, v, "n");
  if (!is_floating(p.dtype) && !ew_allows_integers(p.op))
    r.fail(detail::str_cat(ew_name(p.op), " is defined on f32 and f64 only, not ",
                           dtype_name(p.dtype)));
  return p;
}

// ---- reduce ----------------------------------------------------------------------------------

std::string reduce_descriptor(const ReduceProblem& p) {
  std::string s;
  if (p.outer != 1) s += detail::str_cat("o", p.outer);
  s += detail::str_cat("r", p.reduce);
  if (p.inner != 1) s += detail::str_cat("i", p.inner);
  if (p.op == ReduceOp::max) s += ":max";
  return s + common_parts(p.dtype, p.device);
}

ReduceProblem parse_reduce(Reader& r) {
  const auto v = r.letters({"o", "r", "i"});
  ReduceProblem p;
  p.op = r.take_choice({"sum", "max"}) == 1 ? ReduceOp::max : ReduceOp::sum;
  p.dtype = r.take_dtype();
  p.device = r.take_device();
  r.finish("sum max");
  p.outer = get(v, "o", 1);
  p.reduce = need(r, v, "r");
  p.inner = get(v, "i", 1);
  if (p.op == ReduceOp::max && p.reduce < 1)
    r.fail(detail::str_cat("max needs a non-empty reduced extent, got r", p.reduce));
  return p;
}

// ---- softmax ---------------------------------------------------------------------------------

std::string softmax_descriptor(const SoftmaxProblem& p) {
  std::string s = detail::str_cat("r", p.rows, "c", p.cols);
  if (p.op != SoftmaxOp::softmax) s += detail::str_cat(":", softmax_op_name(p.op));
  if (p.index_dtype != DType::i64) s += detail::str_cat(":", dtype_name(p.index_dtype));
  return s + common_parts(p.dtype, p.device);
}

SoftmaxProblem parse_softmax(Reader& r) {
  const auto v = r.letters({"r", "c"});
  const auto ops = names<SoftmaxOp>(kSoftmaxOps, softmax_op_name);
  SoftmaxProblem p;
  const int op = r.take_choice(ops);
  p.op = op < 0 ? SoftmaxOp::softmax : static_cast<SoftmaxOp>(op);
  p.index_dtype = r.take_word("i32") ? DType::i32 : DType::i64;
  p.dtype = r.take_dtype();
  p.device = r.take_device();
  r.finish(listed(ops) + ", i32 (class ids; i64 the default)");
  p.rows = need(r, v, "r");
  p.cols = need(r, v, "c");
  return p;
}

// ---- embedding -------------------------------------------------------------------------------

std::string embedding_descriptor(const EmbeddingProblem& p) {
  std::string s = detail::str_cat("v", p.rows, "d", p.dim, "n", p.n);
  if (p.pass == EmbeddingPass::backward) s += ":bwd";
  if (p.index_dtype != DType::i64) s += detail::str_cat(":", dtype_name(p.index_dtype));
  return s + common_parts(p.dtype, p.device);
}

EmbeddingProblem parse_embedding(Reader& r) {
  const auto v = r.letters({"v", "d", "n"});
  EmbeddingProblem p;
  p.pass = r.take_choice({"fwd", "bwd"}) == 1 ? EmbeddingPass::backward : EmbeddingPass::forward;
  p.index_dtype = r.take_word("i32") ? DType::i32 : DType::i64;
  p.dtype = r.take_dtype();
  p.device = r.take_device();
  r.finish("fwd bwd, i32 (ids; i64 the default)");
  p.rows = need(r, v, "v");
  p.dim = need(r, v, "d");
  p.n = need(r, v, "n");
  if (p.n > 0 && p.rows < 1)
    r.fail(detail::str_cat("n", p.n, " ids need a table of at least one row, got v", p.rows));
  return p;
}

// ---- dropout ---------------------------------------------------------------------------------

std::string dropout_descriptor(const DropoutProblem& p) {
  std::string s = detail::str_cat("n", p.numel);
  if (p.p != kDefaultDropout) s += ":p" + real(p.p);
  return s + common_parts(p.dtype, p.device);
}

DropoutProblem parse_dropout(Reader& r) {
  const auto v = r.letters({"n"});
  DropoutProblem p;
  p.p = r.take_real("p").value_or(kDefaultDropout);
  p.dtype = r.take_dtype();
  p.device = r.take_device();
  r.finish("p<x>");
  p.numel = need(r, v, "n");
  if (!(p.p >= 0.0 && p.p < 1.0))
    r.fail(detail::str_cat("the drop probability must be in [0, 1), got p", real(p.p)));
  return p;
}

// ---- optimizers ------------------------------------------------------------------------------

std::string optimizer_descriptor(const OptimizerProblem& p) {
  return detail::str_cat("t", p.tensors, "n", p.numel, p.momentum ? ":momentum" : "",
                         p.decoupled_decay ? ":decoupled" : "") +
         common_parts(p.dtype, p.device);
}

OptimizerProblem parse_optimizer(Reader& r, OptimOp op) {
  const auto v = r.letters({"t", "n"});
  OptimizerProblem p;
  p.op = op;
  p.momentum = r.take_word("momentum");
  p.decoupled_decay = r.take_word("decoupled");  // AdamW
  p.dtype = r.take_dtype();
  p.device = r.take_device();
  r.finish(op == OptimOp::sgd ? "momentum" : op == OptimOp::adam ? "decoupled" : "no other part");
  p.tensors = need(r, v, "t");
  p.numel = need(r, v, "n");
  if (p.momentum && op != OptimOp::sgd) r.fail("momentum applies to sgd_update only");
  if (p.decoupled_decay && op != OptimOp::adam) r.fail("decoupled applies to adam_update only");
  if (p.tensors < 0 || (p.tensors == 0 && p.numel != 0))
    r.fail(detail::str_cat("t", p.tensors, " tensors cannot hold n", p.numel, " elements"));
  return p;
}

}  // namespace anvil::harness
