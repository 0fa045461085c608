// SPDX-License-Identifier: Apache-2.0
#pragma once
// Per-tensor autograd state, hung off TensorImpl::autograd (null when not needed).
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "engine/autograd/node.h"
#include "engine/core/tensor.h"

namespace anvil {

struct AutogradMeta final : AutogradMetaBase {
  bool requires_grad = false;       // set by the user on leaves
  Tensor grad;                      // accumulated gradient (leaves)
  std::shared_ptr<Node> grad_fn;    // the node that produced this tensor (non-leaves)
  std::uint32_t output_nr = 0;      // which output of grad_fn
  std::weak_ptr<Node> accumulator;  // leaves: their AccumulateGrad, while a graph uses it
  double folded_sgd_lr = 0.0;       // leaves: > 0 = SGD folded into backward (Note [Folded SGD])
  // leaves: called after a backward pass accumulated into `grad` (engine/autograd/hooks.h)
  std::vector<std::pair<std::uint64_t, std::function<void(const Tensor&)>>> post_accumulate_hooks;
};

// The tensor's meta, or nullptr.
AutogradMeta* autograd_meta(const Tensor& t);
// The tensor's meta, created when missing.
AutogradMeta& ensure_autograd_meta(const Tensor& t);

// The edge through which a gradient flows into `t` (invalid when t needs no gradient).
Edge gradient_edge(const Tensor& t);

// True when grad mode is on and any of `inputs` requires grad.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);
bool any_requires_grad(const std::vector<Tensor>& inputs);

// Records a node named `name` that produced `outputs` from `inputs`. Call only when
// any_requires_grad(inputs). `fn` receives one gradient per output and returns one per input.
void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            Node::BackwardFn fn);

// Note [Folded SGD]
// The DLBench remedy "fold the SGD update into the weight-gradient GEMM through its beta term":
// with optim::SGD::fold_into_backward(), a parameter's meta carries the learning rate, and a
// backward function that can apply the update itself (linear: W <- W - lr * dY^T X as one GEMM
// with alpha = -lr, beta = 1) does so instead of producing a gradient, saving the gradient
// buffer and the optimizer's pass over it. It may do so only when nothing can still read the
// parameter's old value or add to its gradient: inside a backward without retain_graph, and
// when the running node holds the last pending gradient edge into the parameter (a weight used
// twice folds at its last use; the earlier uses leave a gradient that SGD::step() applies).
// Returns the learning rate to fold with, or 0 when `param` must get an ordinary gradient.
double folded_sgd_lr(const Tensor& param);

// Runs reverse mode from `roots` with seed gradients `grads` (Note [Backward engine]).
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                  bool retain_graph);

}  // namespace anvil
