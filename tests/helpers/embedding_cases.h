// SPDX-License-Identifier: Apache-2.0
#pragma once
// The embedding variant check shared by tests/test_embedding_variants.cpp (CPU) and
// tests/cuda/test_cuda_embedding.cpp (GPU) on the variant harness
// (tests/helpers/variant_harness.h): skewed ids (many repeats, some rows unused), both passes,
// every variant of the harness's device called directly on outputs pre-filled with 7 (an element
// left unwritten shows), bit for bit against `ref` on the host.
#include <cstdint>

#include "engine/dispatch/embedding_problem.h"
#include "helpers/variant_harness.h"

namespace anvil::test {

// n ids in [0, rows), skewed towards small ids, as i32 or i64 on the host.
Tensor random_ids(std::int64_t n, std::int64_t rows, DType dtype, std::uint64_t seed);
// Same dtype, shape and bytes (any devices).
bool bit_equal(const Tensor& a, const Tensor& b);

// One table of `rows` x `dim` values of `dtype` and n ids of `index_dtype`: the forward and the
// backward pass of every variant on `device`, each compared with ref. With `repeat`, each pass is
// run twice and must give the same bits (deterministic backward).
void check_embedding_variants(VariantHarness& harness, DType dtype, DType index_dtype,
                              std::int64_t rows, std::int64_t dim, std::int64_t n, Device device,
                              std::uint64_t seed, bool repeat = false);

}  // namespace anvil::test
