// SPDX-License-Identifier: Apache-2.0
#pragma once
// One tensor of an optimizer table's list (engine/dispatch/optimizer_problem.h), alone in its
// header so that the CUDA launchers (kernels/cuda/optimizer_kernels.h, C++17 for nvcc) take the
// same struct as the table's arguments.
#include <cstdint>

namespace anvil {

// One tensor of the list (non-owning; every buffer dense, `numel` elements of the problem's dtype).
//   sgd:        param, grad, state1 = momentum buffer (null without momentum),
//               first = the buffer was just created (it is set to the gradient, not blended)
//   adam:       param, grad, state1 = m, state2 = v
//   grad_norm:  grad
//   grad_scale: grad (scaled in place)
struct OptimTensor {
  void* param = nullptr;
  void* grad = nullptr;
  void* state1 = nullptr;
  void* state2 = nullptr;
  std::int64_t numel = 0;
  bool first = false;
};

}  // namespace anvil
