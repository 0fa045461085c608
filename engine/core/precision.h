// SPDX-License-Identifier: Apache-2.0
#pragma once
// The training precision a run asks for (`anvil train --precision`): its name, its parser, and the
// 16-bit dtype that autocast computes the GEMM-like ops in (Note [Autocast policy]).
#include <cstdint>
#include <string_view>

#include "engine/core/dtype.h"
#include "engine/core/error.h"

namespace anvil {

// fp32: everything in f32. tf32: f32 storage, GEMMs may use TF32 tensor cores (a GPU setting; on
// the CPU it computes as fp32). bf16/fp16: autocast with FP32 master weights.
enum class Precision : std::uint8_t { fp32, tf32, bf16, fp16 };

inline constexpr Precision kAllPrecisions[] = {Precision::fp32, Precision::tf32, Precision::bf16,
                                               Precision::fp16};

constexpr std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::fp32:
      return "fp32";
    case Precision::tf32:
      return "tf32";
    case Precision::bf16:
      return "bf16";
    case Precision::fp16:
      return "fp16";
  }
  return "?";
}

// The dtype the low-precision op list runs in: bf16/f16 for the mixed precisions, f32 otherwise.
constexpr DType low_precision_dtype(Precision p) {
  switch (p) {
    case Precision::bf16:
      return DType::bf16;
    case Precision::fp16:
      return DType::f16;
    case Precision::fp32:
    case Precision::tf32:
      return DType::f32;
  }
  return DType::f32;
}

constexpr bool is_mixed(Precision p) { return p == Precision::bf16 || p == Precision::fp16; }

// Parses "fp32", "tf32", "bf16" or "fp16"; anything else throws naming the text and the choices.
inline Precision parse_precision(std::string_view text) {
  for (const Precision p : kAllPrecisions)
    if (precision_name(p) == text) return p;
  fail("precision", "unknown precision '", text, "' (expected fp32, tf32, bf16 or fp16)");
}

}  // namespace anvil
