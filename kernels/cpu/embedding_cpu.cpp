// SPDX-License-Identifier: Apache-2.0
// The CPU variants of the embedding table: cpu.omp wraps kernels/cpu/omp/embedding_omp.cpp;
// ref is the plain serial definition (forward row copies, backward zero + add in id order).
// Both check the ids first (check_embedding_ids) and write grad whole.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "engine/dispatch/embedding_problem.h"
#include "kernels/cpu/embedding_register.h"
#include "kernels/cpu/omp/embedding_omp.h"
#include "kernels/value_index_types.h"

namespace anvil::kernels {
namespace {

// Checks the ids, then calls body(T{}, ids) with T the value type and ids typed.
template <typename Body>
void with_checked_ids(const EmbeddingArgs& a, Body&& body) {
  const EmbeddingProblem& p = a.problem;
  check_embedding_ids(p, a.ids);
  visit_value_and_index(p.dtype, p.index_dtype, [&](auto zero, auto izero) {
    using I = decltype(izero);
    body(zero, static_cast<const I*>(a.ids));
  });
}

void run_omp(const EmbeddingArgs& a) {
  const EmbeddingProblem& p = a.problem;
  with_checked_ids(a, [&](auto zero, const auto* ids) {
    using T = decltype(zero);
    using I = std::remove_cv_t<std::remove_pointer_t<decltype(ids)>>;
    if (p.pass == EmbeddingPass::forward) {
      embedding_gather<T, I>(static_cast<const T*>(a.weight), ids, static_cast<T*>(a.out), p.n,
                             p.dim);
    } else {
      T* g = static_cast<T*>(a.grad);
      std::fill(g, g + p.rows * p.dim, T(0));
      embedding_scatter_add<T, I>(static_cast<const T*>(a.dy), ids, g, p.n, p.dim);
    }
  });
}

void run_ref(const EmbeddingArgs& a) {
  const EmbeddingProblem& p = a.problem;
  with_checked_ids(a, [&](auto zero, const auto* ids) {
    using T = decltype(zero);
    if (p.pass == EmbeddingPass::forward) {
      const T* w = static_cast<const T*>(a.weight);
      T* out = static_cast<T*>(a.out);
      for (std::int64_t r = 0; r < p.n; ++r)
        for (std::int64_t j = 0; j < p.dim; ++j)
          out[r * p.dim + j] = w[static_cast<std::int64_t>(ids[r]) * p.dim + j];
    } else {
      const T* dy = static_cast<const T*>(a.dy);
      T* g = static_cast<T*>(a.grad);
      for (std::int64_t i = 0; i < p.rows * p.dim; ++i) g[i] = T(0);
      for (std::int64_t r = 0; r < p.n; ++r)
        for (std::int64_t j = 0; j < p.dim; ++j)
          g[static_cast<std::int64_t>(ids[r]) * p.dim + j] += dy[r * p.dim + j];
    }
  });
}

}  // namespace

void register_embedding_cpu() {
  embedding_table().add({.name = "cpu.omp",
                         .supports = embedding_basic_support,
                         .fn = run_omp,
                         .description = "OpenMP row gather; scatter-add over column blocks"});
  embedding_table().add({.name = "ref",
                         .supports = embedding_basic_support,
                         .fn = run_ref,
                         .description = "serial loops"});
}

}  // namespace anvil::kernels
