// SPDX-License-Identifier: Apache-2.0
#pragma once
// The elementwise problem descriptor and its variant table.
// One table serves every pointwise op: the op code says what to compute; the operands arrive
// already broadcast to the output shape (stride-0 dims), so kernels only walk strides.
//   unary:  out = f(a)            binary: out = f(a, b)         scalar forms use `scalar`
//   backward forms take (y or x, dy) as (a, b).
// Variants: cpu.omp (parallel, contiguous fast path), ref (serial strided loop), and
// cuda.custom.elementwise once the CUDA backend is loaded (kernels/cuda/pointwise_register.cpp).
#include <cstdint>
#include <string>
#include <tuple>

#include "engine/core/device.h"
#include "engine/core/dtype.h"
#include "engine/dispatch/ew_op.h"
#include "engine/dispatch/variant_table.h"

namespace anvil {

const char* ew_name(EwOp op);

// A strided operand view handed to kernels (non-owning).
struct EwOperand {
  void* data = nullptr;                   // first element
  const std::int64_t* strides = nullptr;  // in elements, one per output dim
};

struct ElementwiseProblem {
  EwOp op = EwOp::add;
  DType dtype = DType::f32;
  Device device = Device::cpu();
  std::int64_t numel = 0;
  bool contiguous = false;  // all operands dense and of the output's shape (no broadcast)

  DeviceType device_type() const { return device.type; }
  // Every member (Note [Problem fields], engine/dispatch/problem_fields.h).
  bool operator==(const ElementwiseProblem&) const = default;
  auto fields() const { return std::tie(op, dtype, device, numel, contiguous); }
  std::string key() const;
  std::string repr() const;
};

struct ElementwiseArgs {
  ElementwiseProblem problem;
  const std::int64_t* sizes = nullptr;  // output shape
  int ndim = 0;
  EwOperand out, a, b;  // b unused for unary ops
  double scalar = 0.0;  // s of the scalar ops
  double alpha = 1.0;   // add/sub: out = a +- alpha * b
};

using ElementwiseTable = VariantTable<ElementwiseProblem, ElementwiseArgs>;
ElementwiseTable& elementwise_table();

}  // namespace anvil
