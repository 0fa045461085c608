// SPDX-License-Identifier: Apache-2.0
// Embedding ids and a bit comparison for the GPU test (tests/helpers/embedding_cases.h).
#include "helpers/embedding_cases.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

namespace anvil::test {

Tensor random_ids(std::int64_t n, std::int64_t rows, DType dtype, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (auto& x : v) {
    const auto a = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rows));
    const auto b = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rows));
    x = std::min(a, b);  // skewed: many repeats, some rows unused
  }
  const Tensor t = Tensor::from_vector(v, {n});
  return dtype == DType::i64 ? t : t.to(DType::i32);
}

bool bit_equal(const Tensor& a_any, const Tensor& b_any) {
  const Tensor a = a_any.to(Device::cpu()).contiguous(), b = b_any.to(Device::cpu()).contiguous();
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

}  // namespace anvil::test
