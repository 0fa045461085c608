// SPDX-License-Identifier: Apache-2.0
// Embedding problem descriptor, table and the shared id check
// (engine/dispatch/embedding_problem.h).
#include "engine/dispatch/embedding_problem.h"

#include "engine/core/error.h"
#include "engine/dispatch/registration.h"

namespace anvil {

namespace {
const char* pass_name(EmbeddingPass p) {
  return p == EmbeddingPass::forward ? "forward" : "backward";
}
}  // namespace

std::string EmbeddingProblem::key() const {
  return detail::str_cat("embedding ", pass_name(pass), ' ', dtype_name(dtype), ' ',
                         dtype_name(index_dtype), ' ', device.str(), ' ', rows, 'x', dim, ' ', n);
}

std::string EmbeddingProblem::repr() const {
  return detail::str_cat("embedding ", pass_name(pass), ' ', dtype_name(dtype), " ids ",
                         dtype_name(index_dtype), ' ', device.str(), " table [", rows, ", ", dim,
                         "] n=", n);
}

EmbeddingTable& embedding_table() {
  static EmbeddingTable table(
      "embedding", "its backward adds into the weight gradient: each trial would add again");
  register_builtin_kernels();  // fills the table on first use
  return table;
}

Support embedding_basic_support(const EmbeddingProblem& p) {
  if (p.dtype != DType::f32 && p.dtype != DType::f64)
    return Support::no(detail::str_cat("needs f32 or f64 values, got ", dtype_name(p.dtype)));
  if (p.index_dtype != DType::i32 && p.index_dtype != DType::i64)
    return Support::no(detail::str_cat("needs i32 or i64 ids, got ", dtype_name(p.index_dtype)));
  if (p.rows < 0 || p.dim < 0 || p.n < 0)
    return Support::no(detail::str_cat("negative size in ", p.repr()));
  return Support::yes();
}

void check_embedding_ids(const EmbeddingProblem& p, const void* ids) {
  for (std::int64_t r = 0; r < p.n; ++r) {
    const std::int64_t id = p.index_dtype == DType::i32 ? static_cast<const std::int32_t*>(ids)[r]
                                                        : static_cast<const std::int64_t*>(ids)[r];
    ANVIL_CHECK(id >= 0 && id < p.rows, "embedding", "id ", id, " at position ", r,
                " is out of range for a table of ", p.rows, " rows (valid ids: 0..", p.rows - 1,
                ")");
  }
}

}  // namespace anvil
