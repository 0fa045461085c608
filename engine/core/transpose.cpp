// SPDX-License-Identifier: Apache-2.0
// engine/core/transpose.h: 16 x 16 tiles, each walked along src's rows, tile rows over the
// OpenMP threads when there are at least 2^18 elements.
//
// Walking a tile down src's columns instead reads rows that are src_ld elements apart; for
// power-of-two row lengths (1024 floats = 4 KiB) they all map to the same L1 sets, and the
// [256, 1024] -> [1024, 256] transpose took 0.5-0.7 ms instead of 0.15-0.25 ms (1 thread, dev
// VM, 2026-11-22). 8, 16 and 32 wide tiles along src's rows were within 10 % of each other.
#include "engine/core/transpose.h"

#include <algorithm>
#include <cstdint>

namespace anvil {

template <typename T>
void transpose_2d(const T* src, std::int64_t rows, std::int64_t cols, std::int64_t src_ld, T* dst,
                  std::int64_t dst_ld) {
  constexpr std::int64_t kTile = 16;
  const std::int64_t tile_rows = (rows + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (rows * cols >= (1 << 18))
  for (std::int64_t ti = 0; ti < tile_rows; ++ti) {
    const std::int64_t i0 = ti * kTile, i1 = std::min(rows, i0 + kTile);
    for (std::int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const std::int64_t j1 = std::min(cols, j0 + kTile);
      for (std::int64_t i = i0; i < i1; ++i)
        for (std::int64_t j = j0; j < j1; ++j) dst[j * dst_ld + i] = src[i * src_ld + j];
    }
  }
}

template void transpose_2d<float>(const float*, std::int64_t, std::int64_t, std::int64_t, float*,
                                  std::int64_t);
template void transpose_2d<double>(const double*, std::int64_t, std::int64_t, std::int64_t, double*,
                                   std::int64_t);

}  // namespace anvil
