// SPDX-License-Identifier: Apache-2.0
// GEMM problem descriptor (engine/dispatch/gemm_problem.h).
#include "engine/dispatch/gemm_problem.h"

#include "engine/core/error.h"
#include "engine/dispatch/registration.h"

namespace anvil {

GemmProblem GemmProblem::dense(std::int64_t m, std::int64_t n, std::int64_t k, bool trans_a,
                               bool trans_b, DType dtype, std::int64_t batch) {
  GemmProblem p;
  p.dtype = dtype;
  p.trans_a = trans_a;
  p.trans_b = trans_b;
  p.m = m;
  p.n = n;
  p.k = k;
  p.lda = trans_a ? m : k;
  p.ldb = trans_b ? k : n;
  p.ldc = n;
  p.batch = batch;
  p.stride_a = m * k;
  p.stride_b = k * n;
  p.stride_c = m * n;
  return p;
}

std::string GemmProblem::mode() const {
  return std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N");
}

std::string GemmProblem::key() const {
  return detail::str_cat(dtype_name(dtype), ' ', device.str(), ' ', mode(), ' ', m, ' ', n, ' ', k,
                         ' ', lda, ' ', ldb, ' ', ldc, ' ', batch, ' ', stride_a, ' ', stride_b,
                         ' ', stride_c, ' ', beta_zero);
}

std::string GemmProblem::repr() const {
  return detail::str_cat("gemm ", dtype_name(dtype), ' ', device.str(), ' ', mode(), " M=", m,
                         " N=", n, " K=", k, " lda=", lda, " ldb=", ldb, " ldc=", ldc,
                         " batch=", batch, beta_zero ? " beta=0" : " beta!=0");
}

double GemmProblem::bytes() const {
  const double e = static_cast<double>(dtype_size(dtype));
  return e * batch *
         (static_cast<double>(m) * k + static_cast<double>(k) * n +
          (beta_zero ? 1.0 : 2.0) * static_cast<double>(m) * n);
}

void GemmProblem::validate(const char* where) const {
  ANVIL_CHECK(m >= 0 && n >= 0 && k >= 0 && batch >= 1, where, "bad sizes in ", repr());
  // A leading dimension is at least 1 even for an empty matrix (BLAS's rule), so the message
  // names the bound that applies: "lda=0 < 0" for K = 0 said nothing.
  const std::int64_t a_min = std::max<std::int64_t>(1, trans_a ? m : k);
  const std::int64_t b_min = std::max<std::int64_t>(1, trans_b ? k : n);
  ANVIL_CHECK(lda >= a_min, where, "lda=", lda, " < ", a_min, " (max(1, columns of stored A)) in ",
              repr());
  ANVIL_CHECK(ldb >= b_min, where, "ldb=", ldb, " < ", b_min, " (max(1, columns of stored B)) in ",
              repr());
  ANVIL_CHECK(ldc >= std::max<std::int64_t>(1, n), where, "ldc=", ldc, " < max(1, N=", n, ") in ",
              repr());
}

GemmTable& gemm_table() {
  static GemmTable table("gemm");
  register_builtin_kernels();  // fills the table on first use
  return table;
}

}  // namespace anvil
