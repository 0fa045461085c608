// SPDX-License-Identifier: Apache-2.0
#pragma once
// conv_pass_fn(): the variant function of a CPU conv2d kernel written as one function template per
// pass (forward, backward_data, backward_weights) over the element type. It validates the
// problem, then runs the problem's pass for its dtype (f32 or f64): the dispatch that cpu.im2col
// and ref would otherwise both spell out.
#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/floating_variant.h"

namespace anvil::kernels {

// One kernel's functions for one element type.
struct ConvPasses {
  void (*forward)(const ConvArgs&);
  void (*backward_data)(const ConvArgs&);
  void (*backward_weights)(const ConvArgs&);
};

// `variant` names the kernel in validation errors ("conv2d ref").
inline ConvTable::Fn conv_pass_fn(const char* variant, ConvPasses f32, ConvPasses f64) {
  return [variant, f32, f64](const ConvArgs& a) {
    a.problem.validate(variant);
    ANVIL_CHECK(is_floating(a.problem.dtype), variant, "expected f32 or f64, got ",
                dtype_name(a.problem.dtype));
    const ConvPasses& k = a.problem.dtype == DType::f64 ? f64 : f32;
    switch (a.problem.pass) {
      case ConvPass::forward:
        return k.forward(a);
      case ConvPass::backward_data:
        return k.backward_data(a);
      case ConvPass::backward_weights:
        return k.backward_weights(a);
    }
  };
}

}  // namespace anvil::kernels
