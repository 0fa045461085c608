// SPDX-License-Identifier: Apache-2.0
// Embedding forward (row gather) and backward (scatter-add into the used rows), OpenMP.
// Layout: weight [V, D] row-major, ids [N], rows of out/dy [N, D] in ids order.
#include "kernels/cpu/omp/embedding_omp.h"

#include <algorithm>
#include <cstring>

namespace anvil::kernels {

template <typename T, typename I>
void embedding_gather(const T* weight, const I* ids, T* out, std::int64_t n, std::int64_t d) {
#pragma omp parallel for schedule(static) if (n * d >= 32768)
  for (std::int64_t r = 0; r < n; ++r)
    std::memcpy(out + r * d, weight + static_cast<std::int64_t>(ids[r]) * d,
                static_cast<std::size_t>(d) * sizeof(T));
}

template <typename T, typename I>
void embedding_scatter_add(const T* dy, const I* ids, T* grad, std::int64_t n, std::int64_t d) {
  // Column blocks of 64 elements: each thread owns whole columns, so duplicate ids are safe and
  // the result does not depend on the thread count (rows are added in ids order).
  const std::int64_t block = 64, nblocks = (d + block - 1) / block;
  if (nblocks >= 2 && n * d >= 32768) {
#pragma omp parallel for schedule(static)
    for (std::int64_t cb = 0; cb < nblocks; ++cb) {
      const std::int64_t j0 = cb * block, j1 = std::min(d, j0 + block);
      for (std::int64_t r = 0; r < n; ++r) {
        T* g = grad + static_cast<std::int64_t>(ids[r]) * d;
        const T* s = dy + r * d;
        for (std::int64_t j = j0; j < j1; ++j) g[j] += s[j];
      }
    }
    return;
  }
  for (std::int64_t r = 0; r < n; ++r) {
    T* g = grad + static_cast<std::int64_t>(ids[r]) * d;
    const T* s = dy + r * d;
    for (std::int64_t j = 0; j < d; ++j) g[j] += s[j];
  }
}

// NOLINTBEGIN(bugprone-macro-parentheses): the arguments are types in template argument
// lists, where parentheses are not allowed.
#define ANVIL_EMBEDDING_INSTANTIATE(T, I)                                                   \
  template void embedding_gather<T, I>(const T*, const I*, T*, std::int64_t, std::int64_t); \
  template void embedding_scatter_add<T, I>(const T*, const I*, T*, std::int64_t, std::int64_t);
ANVIL_EMBEDDING_INSTANTIATE(float, std::int32_t)
ANVIL_EMBEDDING_INSTANTIATE(float, std::int64_t)
ANVIL_EMBEDDING_INSTANTIATE(double, std::int32_t)
ANVIL_EMBEDDING_INSTANTIATE(double, std::int64_t)
#undef ANVIL_EMBEDDING_INSTANTIATE
// NOLINTEND(bugprone-macro-parentheses)

}  // namespace anvil::kernels
