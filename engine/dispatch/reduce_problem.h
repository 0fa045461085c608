// SPDX-License-Identifier: Apache-2.0
#pragma once
// The reduction problem descriptor and its variant table.
// A reduction sees its (contiguous) input as x[outer, reduce, inner] and writes
// out[outer, inner]: engine/ops/reduce.cpp permutes and copies so the reduced dims form the
// middle block. `sum` computes scale * sum_r x[o, r, i] (mean = sum with scale 1/reduce);
// `max` computes the max over r and its int64 index r (first one on ties, NaN propagates).
// Variants: cpu.omp (kernels/cpu/omp/reduce_omp.cpp), ref (kernels/cpu/ref/reduce_ref.cpp),
// cuda.custom.reduce (kernels/cuda/reduce_kernels.cu).
#include <cstdint>
#include <string>
#include <tuple>

#include "engine/core/device.h"
#include "engine/core/dtype.h"
#include "engine/dispatch/variant_table.h"

namespace anvil {

enum class ReduceOp : std::uint8_t { sum, max };
const char* reduce_op_name(ReduceOp op);

struct ReduceProblem {
  ReduceOp op = ReduceOp::sum;
  DType dtype = DType::f32;  // of x and out (f32 or f64)
  Device device = Device::cpu();
  std::int64_t outer = 1, reduce = 1, inner = 1;

  DeviceType device_type() const { return device.type; }
  // Every member (Note [Problem fields], engine/dispatch/problem_fields.h).
  bool operator==(const ReduceProblem&) const = default;
  auto fields() const { return std::tie(op, dtype, device, outer, reduce, inner); }
  std::string key() const;
  std::string repr() const;
};

struct ReduceArgs {
  ReduceProblem problem;
  const void* x = nullptr;        // [outer, reduce, inner], contiguous
  void* out = nullptr;            // [outer, inner], contiguous
  std::int64_t* index = nullptr;  // [outer, inner] (max only)
  double scale = 1.0;             // sum only: out = scale * sum
};

using ReduceTable = VariantTable<ReduceProblem, ReduceArgs>;
ReduceTable& reduce_table();

// Support answer shared by the variants: f32/f64 only, and max needs an index buffer and a
// non-empty reduced extent.
Support reduce_basic_support(const ReduceProblem& p);

}  // namespace anvil
