// SPDX-License-Identifier: Apache-2.0
#pragma once
// The embedding problem descriptor and its variant table (engine/ops/lstm.cpp dispatches
// through it): a lookup of rows of a weight table [V, D] by integer ids, and its backward.
//   forward   out[n, :] = weight[ids[n], :]                   (ids validated by the variant)
//   backward  grad[v, :] = sum over n with ids[n] == v of dy[n, :], in increasing n (grad is
//             written whole: zero rows where no id names them)
// Buffers are dense row-major: weight/grad [V, D], ids [N] (i32 or i64), out/dy [N, D].
// Variants: cpu.omp (kernels/cpu/omp/embedding_omp.cpp: parallel over column blocks, so
// repeated ids never race), ref (serial loops, kernels/cpu/ref/embedding_ref.cpp),
// cuda.custom.embedding (kernels/cuda/embedding_kernels.cu: the backward sorts positions by id,
// stably, and sums each id's rows in position order: deterministic, bit-equal run to run).
#include <cstdint>
#include <string>
#include <tuple>

#include "engine/core/device.h"
#include "engine/core/dtype.h"
#include "engine/dispatch/variant_table.h"

namespace anvil {

enum class EmbeddingPass : std::uint8_t { forward, backward };

struct EmbeddingProblem {
  EmbeddingPass pass = EmbeddingPass::forward;
  DType dtype = DType::f32;        // weight / out / dy / grad: f32 or f64
  DType index_dtype = DType::i64;  // ids: i32 or i64
  Device device = Device::cpu();
  std::int64_t rows = 0;  // V
  std::int64_t dim = 0;   // D
  std::int64_t n = 0;     // number of ids

  DeviceType device_type() const { return device.type; }
  // Every member (Note [Problem fields], engine/dispatch/problem_fields.h).
  bool operator==(const EmbeddingProblem&) const = default;
  auto fields() const { return std::tie(pass, dtype, index_dtype, device, rows, dim, n); }
  std::string key() const;
  std::string repr() const;
};

struct EmbeddingArgs {
  EmbeddingProblem problem;
  const void* ids = nullptr;     // [n]
  const void* weight = nullptr;  // forward: [rows, dim]
  void* out = nullptr;           // forward: [n, dim]
  const void* dy = nullptr;      // backward: [n, dim]
  void* grad = nullptr;          // backward: [rows, dim], written whole
};

using EmbeddingTable = VariantTable<EmbeddingProblem, EmbeddingArgs>;
EmbeddingTable& embedding_table();  // op "embedding"

// Support answer shared by the variants: f32/f64 values, i32/i64 ids, non-negative sizes.
Support embedding_basic_support(const EmbeddingProblem& p);

// The CPU variants' range check: throws anvil::Error naming the first id outside [0, rows),
// its position and the table's size (the CUDA variant reports the same through the device's
// error record at the next wait: Note [Host waits in a step]).
void check_embedding_ids(const EmbeddingProblem& p, const void* ids);

}  // namespace anvil
