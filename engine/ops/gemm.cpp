// SPDX-License-Identifier: Apache-2.0
// Tensor-level GEMM (engine/ops/gemm.h): view mapping (Note [Views as transpose modes]),
// checks, dispatch through GemmCall (Note [GEMM through the table]).
#include "engine/ops/gemm.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "engine/core/views.h"
#include "engine/dispatch/gemm_call.h"
#include "engine/ops/elementwise.h"

namespace anvil::ops {
namespace {

// One operand as the GEMM sees it: base pointer, stored-transposed flag, leading dim, batch stride.
struct Operand {
  Tensor t;  // keeps a contiguous copy alive when one was needed
  bool trans = false;
  std::int64_t ld = 0;
  std::int64_t batch_stride = 0;
};

// rows x cols logical matrix (after the caller's own transpose flag is NOT applied yet).
Operand as_operand(const Tensor& x, bool trans) {
  const std::int64_t nd = x.dim();
  const std::int64_t r = x.sizes()[nd - 2], c = x.sizes()[nd - 1];
  const std::int64_t s0 = x.strides()[nd - 2], s1 = x.strides()[nd - 1];
  const std::int64_t bs = nd == 3 ? x.strides()[0] : 0;
  if (s1 == 1 && (s0 >= std::max<std::int64_t>(c, 1) || r == 1))
    return {x, trans, std::max<std::int64_t>(s0, std::max<std::int64_t>(c, 1)), bs};
  if (s0 == 1 && (s1 >= std::max<std::int64_t>(r, 1) || c == 1))
    return {x, !trans, std::max<std::int64_t>(s1, std::max<std::int64_t>(r, 1)), bs};
  Tensor d = raw::contiguous(x);
  return {d, trans, std::max<std::int64_t>(c, 1), nd == 3 ? r * c : 0};
}

// Note [GEMM output overlap]
// C is written, so no two of its elements may share memory. An expand()ed C (stride 0) or one
// whose rows overlap (row stride < N) used to pass the checks and then be written through
// ldc = max(row stride, N), i.e. past the end of its storage. This is a sufficient test: with
// the dims of size > 1 sorted by stride, each stride must reach past the span of the smaller
// ones. Every dense layout, permutation and padded slice passes.
bool non_overlapping(const Tensor& t) {
  if (t.numel() == 0) return true;
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (stride, size)
  for (std::int64_t d = 0; d < t.dim(); ++d)
    if (t.sizes()[d] > 1) dims.emplace_back(t.strides()[d], t.sizes()[d]);
  std::sort(dims.begin(), dims.end());
  std::int64_t span = 1;  // elements covered by the dims so far
  for (const auto& [stride, size] : dims) {
    if (stride < span) return false;
    span += stride * (size - 1);
  }
  return true;
}

void check_args(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c) {
  check_defined(a, "gemm", "A");
  check_defined(b, "gemm", "B");
  check_defined(c, "gemm", "C");
  ANVIL_CHECK((a.dim() == 2 || a.dim() == 3) && a.dim() == b.dim() && a.dim() == c.dim(), "gemm",
              "expected 2-D or 3-D A, B, C of equal rank, got A ", shape_str(a.sizes()), ", B ",
              shape_str(b.sizes()), ", C ", shape_str(c.sizes()));
  ANVIL_CHECK(a.dtype() == b.dtype() && a.dtype() == c.dtype(), "gemm", "dtype mismatch: A ",
              dtype_name(a.dtype()), ", B ", dtype_name(b.dtype()), ", C ", dtype_name(c.dtype()));
  check_same_device(a, b, "gemm");
  check_same_device(a, c, "gemm");
  const std::int64_t nd = a.dim();
  const std::int64_t m = a.sizes()[nd - (ta ? 1 : 2)], ka = a.sizes()[nd - (ta ? 2 : 1)];
  const std::int64_t kb = b.sizes()[nd - (tb ? 1 : 2)], n = b.sizes()[nd - (tb ? 2 : 1)];
  ANVIL_CHECK(ka == kb, "gemm", "inner dimensions differ: op(A) is [", m, ",", ka,
              "] and op(B) is [", kb, ",", n, "] (A ", shape_str(a.sizes()),
              ta ? " transposed" : "", ", B ", shape_str(b.sizes()), tb ? " transposed" : "", ")");
  ANVIL_CHECK(c.sizes()[nd - 2] == m && c.sizes()[nd - 1] == n, "gemm", "C is ",
              shape_str(c.sizes()), " but op(A) @ op(B) is [", m, ",", n, "]");
  if (nd == 3)
    ANVIL_CHECK(a.sizes()[0] == b.sizes()[0] && a.sizes()[0] == c.sizes()[0], "gemm",
                "batch sizes differ: A ", shape_str(a.sizes()), ", B ", shape_str(b.sizes()),
                ", C ", shape_str(c.sizes()));
  ANVIL_CHECK(c.strides()[nd - 1] == 1 || c.sizes()[nd - 1] == 1, "gemm",
              "C must have dense rows (stride 1 in its last dim), got strides ",
              shape_str(c.strides()));
  ANVIL_CHECK(non_overlapping(c), "gemm", "C ", shape_str(c.sizes()), " with strides ",
              shape_str(c.strides()),
              " has elements that overlap in memory (e.g. an expand() view); "
              "write into a contiguous tensor instead");
}

GemmProblem make_problem(const Operand& A, const Operand& B, const Tensor& c, std::int64_t m,
                         std::int64_t n, std::int64_t k, double beta) {
  const std::int64_t nd = c.dim();
  GemmProblem p;
  p.dtype = c.dtype();
  p.device = c.device();
  p.trans_a = A.trans;
  p.trans_b = B.trans;
  p.m = m;
  p.n = n;
  p.k = k;
  p.lda = A.ld;
  p.ldb = B.ld;
  p.ldc = m > 1 ? std::max<std::int64_t>(c.strides()[nd - 2], n) : std::max<std::int64_t>(n, 1);
  p.batch = nd == 3 ? c.sizes()[0] : 1;
  p.stride_a = A.batch_stride;
  p.stride_b = B.batch_stride;
  p.stride_c = nd == 3 ? c.strides()[0] : 0;
  p.beta_zero = beta == 0.0;
  return p;
}

// The checked operands of C = op(A) op(B) and their table problem.
struct Planned {
  Operand A, B;
  GemmProblem problem;
};
Planned plan(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c, double beta) {
  check_args(a, ta, b, tb, c);
  const std::int64_t nd = a.dim();
  Planned pl{as_operand(a, ta), as_operand(b, tb), {}};
  const std::int64_t m = c.sizes()[nd - 2], n = c.sizes()[nd - 1];
  const std::int64_t k = a.sizes()[nd - (ta ? 2 : 1)];
  pl.problem = make_problem(pl.A, pl.B, c, m, n, k, beta);
  return pl;
}

}  // namespace

GemmProblem gemm_problem_for(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c,
                             double beta) {
  return plan(a, ta, b, tb, c, beta).problem;
}

void gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c, double alpha,
          double beta) {
  const Planned pl = plan(a, ta, b, tb, c, beta);
  const Operand &A = pl.A, &B = pl.B;
  const std::int64_t m = pl.problem.m, n = pl.problem.n, k = pl.problem.k;
  GemmArgs args;
  args.problem = pl.problem;
  args.problem.validate("gemm");
  args.a = A.t.data_ptr();
  args.b = B.t.data_ptr();
  args.c = c.data_ptr();
  args.alpha = alpha;
  args.beta = beta;
  if (m == 0 || n == 0) return;
  if (k == 0) {  // empty sum: C = beta * C
    if (beta == 0.0)
      Tensor(c).zero_();
    else if (beta != 1.0)
      mul_scalar_(c, beta);
    return;
  }
  run_gemm(args);  // Note [GEMM through the table]
}

Tensor mm(const Tensor& a, bool ta, const Tensor& b, bool tb) {
  check_defined(a, "mm", "A");
  check_defined(b, "mm", "B");
  ANVIL_CHECK(a.dim() == b.dim() && (a.dim() == 2 || a.dim() == 3), "mm",
              "expected two 2-D or two 3-D tensors, got ", shape_str(a.sizes()), " and ",
              shape_str(b.sizes()));
  const std::int64_t nd = a.dim();
  const std::int64_t m = a.sizes()[nd - (ta ? 1 : 2)];
  const std::int64_t n = b.sizes()[nd - (tb ? 2 : 1)];
  Shape shape = nd == 3 ? Shape{a.sizes()[0], m, n} : Shape{m, n};
  Tensor c = Tensor::empty(shape, a.dtype(), a.device());
  gemm(a, ta, b, tb, c, 1.0, 0.0);
  return c;
}

}  // namespace anvil::ops
