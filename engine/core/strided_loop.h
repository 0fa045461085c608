// SPDX-License-Identifier: Apache-2.0
#pragma once
// Walks the elements of N-d strided operands in row-major order, in runs along the
// innermost dimension, so that elementwise kernels (and copies) are one tight inner loop.
//
// Note [Dimension coalescing]
// Before looping, adjacent dimensions d, d+1 are merged when every operand has
// stride[d] == stride[d+1] * size[d+1] (they are contiguous with each other), and size-1
// dimensions are dropped. A contiguous tensor of any rank thus becomes one run of numel
// elements, which is what makes the common case as fast as a flat loop.
#include <array>
#include <cstdint>
#include <vector>

namespace anvil {

template <int NumOperands>
struct StridedLayout {
  std::vector<std::int64_t> sizes;  // coalesced, outermost first; never empty (may be {1} or {0})
  std::array<std::vector<std::int64_t>, NumOperands> strides;  // in elements

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto s : sizes) n *= s;
    return n;
  }
  std::int64_t inner_size() const { return sizes.back(); }
  std::int64_t inner_stride(int op) const { return strides[op].back(); }
  std::int64_t outer_count() const { return inner_size() == 0 ? 0 : numel() / inner_size(); }

  // Element offset of each operand at the start of outer run `r` (0 <= r < outer_count()).
  std::array<std::int64_t, NumOperands> outer_offsets(std::int64_t r) const {
    std::array<std::int64_t, NumOperands> off{};
    for (int d = static_cast<int>(sizes.size()) - 2; d >= 0; --d) {
      const std::int64_t i = r % sizes[d];
      r /= sizes[d];
      for (int k = 0; k < NumOperands; ++k) off[k] += i * strides[k][d];
    }
    return off;
  }
};

// Builds the coalesced layout of operands that all have shape `shape` (broadcast already
// applied: a broadcast dimension has stride 0).
template <int NumOperands>
StridedLayout<NumOperands> make_strided_layout(
    const std::vector<std::int64_t>& shape,
    const std::array<const std::vector<std::int64_t>*, NumOperands>& strides) {
  StridedLayout<NumOperands> L;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;  // size-1 dims contribute nothing
    bool merge = !L.sizes.empty();
    for (int k = 0; k < NumOperands && merge; ++k)
      merge = L.strides[k].back() == (*strides[k])[d] * shape[d];
    if (merge) {
      L.sizes.back() *= shape[d];
      for (int k = 0; k < NumOperands; ++k) L.strides[k].back() = (*strides[k])[d];
    } else {
      L.sizes.push_back(shape[d]);
      for (int k = 0; k < NumOperands; ++k) L.strides[k].push_back((*strides[k])[d]);
    }
  }
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (shape[d] == 0) {  // empty tensor: one empty run
      L.sizes.assign(1, 0);
      for (int k = 0; k < NumOperands; ++k) L.strides[k].assign(1, 1);
    }
  if (L.sizes.empty()) {  // scalar or all-ones shape: one element
    L.sizes.push_back(1);
    for (int k = 0; k < NumOperands; ++k) L.strides[k].push_back(1);
  }
  return L;
}

}  // namespace anvil
