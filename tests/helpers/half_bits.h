// SPDX-License-Identifier: Apache-2.0
#pragma once
// Bit patterns of bf16/f16 tensors for the 16-bit tests (test_half_*.cpp, cuda/test_cuda_half.cpp):
// the patterns of a tensor's elements in order, and a tensor holding every pattern once.
#include <cstdint>
#include <vector>

#include "engine/core/tensor.h"

namespace anvil::test {

// The 16-bit patterns of a bf16/f16 tensor (on any device), in index order.
inline std::vector<std::uint16_t> bits_of(const Tensor& t) {
  const Tensor c = t.to(Device::cpu()).contiguous();
  const auto* p = static_cast<const std::uint16_t*>(c.data_ptr());
  return {p, p + c.numel()};
}

// Every 16-bit pattern once, as a [256, 256] CPU tensor of dtype `t` (bf16 or f16).
inline Tensor all_half_patterns(DType t) {
  Tensor x = Tensor::empty({256, 256}, t);
  auto* p = static_cast<std::uint16_t*>(x.data_ptr());
  for (std::uint32_t i = 0; i < 65536; ++i) p[i] = static_cast<std::uint16_t>(i);
  return x;
}

}  // namespace anvil::test
