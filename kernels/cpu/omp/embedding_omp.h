// SPDX-License-Identifier: Apache-2.0
#pragma once
// Embedding gather and scatter-add (kernels/cpu/omp/embedding_omp.cpp), direct entry points on
// dense row-major buffers: weight/grad [V, D], ids [N] (int32 or int64, already range-checked
// by engine/ops/lstm.cpp), out/dy [N, D].
#include <cstdint>

namespace anvil::kernels {

// out[n, :] = weight[ids[n], :]
template <typename T, typename I>
void embedding_gather(const T* weight, const I* ids, T* out, std::int64_t n, std::int64_t d);
// grad[ids[n], :] += dy[n, :] for every n (rows never named stay untouched). Parallel over
// column blocks, so repeated ids never race.
template <typename T, typename I>
void embedding_scatter_add(const T* dy, const I* ids, T* grad, std::int64_t n, std::int64_t d);

}  // namespace anvil::kernels
