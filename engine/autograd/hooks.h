// SPDX-License-Identifier: Apache-2.0
#pragma once
// Hooks on leaf tensors (parameters) that run when backward has finished accumulating their
// gradient, as torch.Tensor.register_post_accumulate_grad_hook. Data parallelism uses them to
// start a gradient bucket's all-reduce while the rest of backward runs (Note [Gradient buckets]).
//
// Note [Post-accumulate hooks]
// The backward engine (Note [Backward engine]) runs a leaf's AccumulateGrad node exactly once
// per backward pass, after every gradient edge into the leaf has been summed into the node's
// input, so at that point leaf.grad() holds the final gradient of the pass. Hooks run right
// there, on the thread running backward, in registration order, with the leaf as argument; they
// must not record autograd ops (backward runs under NoGradGuard). A parameter whose update was
// folded into backward (Note [Folded SGD]) gets no gradient and its hooks do not run.
#include <cstdint>
#include <functional>

#include "engine/core/tensor.h"

namespace anvil {

using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

// Registers `hook` on a leaf that requires grad; returns an id for removal. Throws for a
// non-leaf or a tensor that does not require grad.
std::uint64_t register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook);
// Removes the hook with `id` (no-op when it is not there).
void remove_post_accumulate_grad_hook(const Tensor& leaf, std::uint64_t id);

}  // namespace anvil
