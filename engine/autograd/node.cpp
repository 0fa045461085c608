// SPDX-License-Identifier: Apache-2.0
// Autograd nodes (engine/autograd/node.h): iterative destruction and gradient accumulation.
#include "engine/autograd/node.h"

#include "engine/autograd/autograd_meta.h"
#include "engine/core/views.h"
#include "engine/ops/elementwise.h"

namespace anvil {

Node::Node(std::string name, std::vector<Edge> next, std::vector<OutputInfo> outputs, BackwardFn fn)
    : name_(std::move(name)),
      next_(std::move(next)),
      outputs_(std::move(outputs)),
      fn_(std::move(fn)) {}

// Destroying the last owner of a long chain would recurse once per node. Instead, children that
// this node owns alone are moved into a local stack whose entries are emptied (their edges
// moved to the stack too) before they die, so every destructor runs at depth one.
Node::~Node() {
  std::vector<std::shared_ptr<Node>> stack;
  auto take_children = [&stack](std::vector<Edge>& edges) {
    for (auto& e : edges)
      if (e.node && e.node.use_count() == 1) stack.push_back(std::move(e.node));
    edges.clear();
  };
  take_children(next_);
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    take_children(n->next_);
    n->fn_ = nullptr;  // saved tensors may hold large buffers; drop them first
  }                    // n dies here with no children left
}

std::vector<Tensor> Node::apply(const std::vector<Tensor>& grad_outputs) {
  ANVIL_CHECK(!released_, "backward", "trying to backward through ", name_,
              " a second time: its saved tensors were freed; pass retain_graph=true to the first "
              "backward()");
  return fn_(grad_outputs);
}

void Node::release() {
  fn_ = nullptr;
  released_ = true;
}

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf)
    : Node("AccumulateGrad", {}, {}, nullptr), leaf_(std::move(leaf)) {
  outputs_.push_back({leaf_->sizes, leaf_->dtype, Device()});
}

std::vector<Tensor> AccumulateGrad::apply(const std::vector<Tensor>& grad_outputs) {
  Tensor leaf(leaf_);
  const Tensor& g = grad_outputs.at(0);
  if (!g.defined()) return {};
  AutogradMeta& meta = ensure_autograd_meta(leaf);
  if (!meta.grad.defined()) {
    // Take the buffer when nobody else can see it (the common case: a fresh GEMM result);
    // otherwise copy, so that later in-place accumulation cannot change another tensor.
    const bool exclusive = g.is_contiguous() && g.impl_ptr().use_count() == 1 &&
                           g.storage().use_count() == 1 &&
                           g.numel() * static_cast<std::int64_t>(g.element_size()) ==
                               static_cast<std::int64_t>(g.storage()->bytes());
    meta.grad = exclusive ? raw::detach(g) : raw::clone(g);
  } else {
    ops::add_(meta.grad, g);
  }
  // Note [Post-accumulate hooks]: the engine runs this node once per backward, after all the
  // gradient edges into the leaf were summed, so the gradient is final for this pass here.
  for (const auto& [id, hook] : meta.post_accumulate_hooks) hook(leaf);
  return {};
}

}  // namespace anvil
