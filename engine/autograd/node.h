// SPDX-License-Identifier: Apache-2.0
#pragma once
// Autograd graph nodes.
//
// Note [Autograd graph]
// A tensor produced by a recorded op points (AutogradMeta::grad_fn) at the Node that made it;
// the Node points at the nodes of its inputs through `next` edges. Leaves that require grad
// are reached through an AccumulateGrad node, which the leaf itself holds only weakly (no
// cycle). Saved tensors are always detached copies of the handles (same storage, no autograd
// state), so a node never keeps a graph alive through a saved output: the graph is a DAG owned
// from the outputs downwards.
// Node destruction is iterative (see ~Node): freeing a 100,000-node chain must not recurse.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/tensor.h"

namespace anvil {

class Node;

// Points at one output (output_nr) of a node; node == nullptr means "no gradient needed".
struct Edge {
  std::shared_ptr<Node> node;
  std::uint32_t output_nr = 0;
  bool valid() const { return node != nullptr; }
};

// Shape/dtype/device of one output, to make zero gradients for outputs nobody used.
struct OutputInfo {
  Shape sizes;
  DType dtype = DType::f32;
  Device device;
};

class Node {
 public:
  // grad_outputs has one entry per output (zeros substituted where unused); returns one
  // gradient per `next` edge (undefined where that input needs none).
  using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs)>;

  Node(std::string name, std::vector<Edge> next, std::vector<OutputInfo> outputs, BackwardFn fn);
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<Edge>& next() const { return next_; }
  const std::vector<OutputInfo>& outputs() const { return outputs_; }

  // Runs the backward function; throws if the saved state was already released.
  virtual std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs);
  // Frees the saved tensors (after a backward without retain_graph).
  virtual void release();
  bool released() const { return released_; }

 protected:
  std::string name_;
  std::vector<Edge> next_;
  std::vector<OutputInfo> outputs_;
  BackwardFn fn_;
  bool released_ = false;
};

// Sink for a leaf tensor's gradient: adds the incoming gradient into leaf.grad().
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  void release() override {}  // holds no saved state; may be reached again next step

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

}  // namespace anvil
