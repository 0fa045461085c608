// SPDX-License-Identifier: Apache-2.0
#pragma once
// The dropout problem descriptor and its variant table (engine/autograd/functions_dropout.cpp
// dispatches through it).
#include <cstdint>
#include <string>
#include <tuple>

#include "engine/core/device.h"
#include "engine/core/dtype.h"
#include "engine/dispatch/variant_table.h"

namespace anvil {

// y = x * mask, mask = keep ? 1/(1-p) : 0 with keep ~ Bernoulli(1-p), over dense buffers.
// Variants: cpu.mt19937 (the mask drawn element by element from the Generator's mt19937_64: the
// CPU default), ref (serial Philox4x32-10 on the host, Note [Dropout counter RNG]),
// cuda.custom.dropout (the same Philox stream on the GPU: identical masks to ref for one seed).
struct DropoutProblem {
  DType dtype = DType::f32;
  Device device = Device::cpu();
  std::int64_t numel = 0;
  double p = 0.5;

  DeviceType device_type() const { return device.type; }
  // Every member (Note [Problem fields], engine/dispatch/problem_fields.h).
  bool operator==(const DropoutProblem&) const = default;
  auto fields() const { return std::tie(dtype, device, numel, p); }
  std::string key() const;
  std::string repr() const;
};

class Generator;  // engine/core/random.h

struct DropoutArgs {
  DropoutProblem problem;
  const void* x = nullptr;
  void* y = nullptr;
  void* mask = nullptr;
  Generator* gen = nullptr;  // never null: the variant draws what it needs from it
};

using DropoutTable = VariantTable<DropoutProblem, DropoutArgs>;
DropoutTable& dropout_table();  // op "dropout"

// Note [Dropout counter RNG]
// A counter-based generator makes the mask a pure function of (seed, element index), so a GPU
// kernel can draw any element independently and the host can reproduce it exactly. Element i
// takes 32-bit lane i % 4 of Philox4x32-10 (Salmon et al., SC'11) with counter
// (i / 4 as two 32-bit words, offset as two words) and key = seed; it is kept when that word,
// compared as an integer, is below dropout_keep_threshold(p) = round((1 - p) * 2^32). Integer
// comparison keeps host and device bit-identical. The seed is one draw from the Generator per
// call (offset 0), so seeding the Generator makes a run reproducible on every device.
std::uint64_t dropout_keep_threshold(double p);

}  // namespace anvil
