// SPDX-License-Identifier: Apache-2.0
#pragma once
// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC'11), written once for the host (the dropout `ref` variant) and the GPU
// (cuda.custom.dropout), so both draw bit-identical masks (Note [Dropout counter RNG] in
// engine/dispatch/dropout_problem.h). C++17-clean, no CUDA headers: nvcc sees __host__ __device__.
#include <cstdint>

#if defined(__CUDACC__)
#define ANVIL_PHILOX_HD __host__ __device__ __forceinline__
#else
#define ANVIL_PHILOX_HD inline
#endif

namespace anvil::kernels {

struct Philox4 {
  std::uint32_t x[4];
};

ANVIL_PHILOX_HD void philox_mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi,
                                    std::uint32_t& lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b);
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}

// Four random 32-bit words for counter (c0..c3) under key (k0, k1): 10 rounds, the key bumped
// by the Weyl constants between rounds.
ANVIL_PHILOX_HD Philox4 philox4x32_10(std::uint32_t c0, std::uint32_t c1, std::uint32_t c2,
                                      std::uint32_t c3, std::uint32_t k0, std::uint32_t k1) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    std::uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kM0, c0, hi0, lo0);
    philox_mulhilo(kM1, c2, hi1, lo1);
    const std::uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// The four words of group g = element index / 4 (elements 4g .. 4g+3) for (seed, offset).
ANVIL_PHILOX_HD Philox4 dropout_words(std::uint64_t group, std::uint64_t seed,
                                      std::uint64_t offset) {
  return philox4x32_10(static_cast<std::uint32_t>(group), static_cast<std::uint32_t>(group >> 32),
                       static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(offset >> 32),
                       static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

}  // namespace anvil::kernels
