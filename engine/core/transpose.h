// SPDX-License-Identifier: Apache-2.0
#pragma once
// Out-of-place 2-D transpose of dense rows: dst[j, i] = src[i, j] for i < rows, j < cols, with
// row strides (leading dimensions) src_ld >= cols and dst_ld >= rows, in elements. Used by the
// CPU copy of a transposed view (Tensor::copy_, contiguous()) and by kernels that compute a
// product transposed (Note [Transposed weight gradients]).
#include <cstdint>

namespace anvil {

template <typename T>
void transpose_2d(const T* src, std::int64_t rows, std::int64_t cols, std::int64_t src_ld, T* dst,
                  std::int64_t dst_ld);

}  // namespace anvil
