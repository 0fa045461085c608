// SPDX-License-Identifier: Apache-2.0
// The reverse-mode engine: record(), gradient edges and run_backward().
//
// Note [Backward engine]
// 1. Walk the graph from the roots with an explicit stack (no recursion) and count, for every
//    node, how many edges point at it.
// 2. Process nodes whose count reached zero (a ready stack), so each node runs once, after all
//    gradients for its outputs have been summed into its input buffer.
// 3. Without retain_graph, each node releases its saved tensors right after it ran, so memory
//    is returned during the backward pass, not at its end.
#include <unordered_map>

#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/views.h"
#include "engine/ops/elementwise.h"

namespace anvil {

AutogradMeta* autograd_meta(const Tensor& t) {
  if (!t.defined()) return nullptr;
  return static_cast<AutogradMeta*>(t.impl().autograd.get());
}

AutogradMeta& ensure_autograd_meta(const Tensor& t) {
  auto& slot = t.impl().autograd;
  if (!slot) slot = std::make_unique<AutogradMeta>();
  return *static_cast<AutogradMeta*>(slot.get());
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = autograd_meta(t);
  if (m == nullptr) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (!m->requires_grad) return {};
  std::shared_ptr<Node> acc = m->accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    m->accumulator = acc;
  }
  return {acc, 0};
}

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            Node::BackwardFn fn) {
  std::vector<Edge> next;
  next.reserve(inputs.size());
  for (const Tensor& in : inputs) next.push_back(in.defined() ? gradient_edge(in) : Edge{});
  std::vector<OutputInfo> infos;
  infos.reserve(outputs.size());
  for (const Tensor& out : outputs) infos.push_back({out.sizes(), out.dtype(), out.device()});
  auto node = std::make_shared<Node>(name, std::move(next), std::move(infos), std::move(fn));
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    AutogradMeta& m = ensure_autograd_meta(outputs[i]);
    m.grad_fn = node;
    m.output_nr = static_cast<std::uint32_t>(i);
  }
}

namespace {
// What folded_sgd_lr() needs to know about the backward running on this thread.
struct BackwardContext {
  const std::unordered_map<Node*, int>* deps = nullptr;
  bool retain_graph = true;
};
thread_local BackwardContext t_backward;
}  // namespace

double folded_sgd_lr(const Tensor& param) {
  const AutogradMeta* m = autograd_meta(param);
  if (!m || m->folded_sgd_lr <= 0 || m->grad_fn || !t_backward.deps || t_backward.retain_graph)
    return 0.0;
  const std::shared_ptr<Node> acc = m->accumulator.lock();
  if (!acc) return 0.0;
  // deps counts the edges into the accumulator from nodes that have not finished yet; the
  // running node's own edge is still counted, so 1 means "this is the last use".
  const auto it = t_backward.deps->find(acc.get());
  return (it != t_backward.deps->end() && it->second == 1) ? m->folded_sgd_lr : 0.0;
}

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                  bool retain_graph) {
  NoGradGuard no_grad;  // backward functions must not record
  // 1. Dependency counts by an iterative walk.
  std::unordered_map<Node*, int> deps;
  struct ContextScope {  // restores the outer context (a backward run inside a backward)
    BackwardContext saved = t_backward;
    ~ContextScope() { t_backward = saved; }
  } scope;
  t_backward = {&deps, retain_graph};
  std::vector<Node*> stack;
  std::vector<Edge> root_edges;
  for (const Tensor& r : roots) {
    Edge e = gradient_edge(r);
    ANVIL_CHECK(e.valid(), "backward", "tensor ", shape_str(r.sizes()),
                " does not require grad and has no grad_fn");
    root_edges.push_back(e);
    if (deps.emplace(e.node.get(), 0).second) stack.push_back(e.node.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next()) {
      if (!e.valid()) continue;
      auto [it, fresh] = deps.emplace(e.node.get(), 0);
      ++it->second;
      if (fresh) stack.push_back(e.node.get());
    }
  }
  // 2. Seed the roots' input buffers, then run nodes as they become ready.
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto accumulate = [&buffers](const Edge& e, Tensor g) {
    auto& buf = buffers[e.node.get()];
    if (buf.empty()) buf.resize(e.node->outputs().size());
    Tensor& slot = buf[e.output_nr];
    slot = slot.defined() ? ops::add(slot, g) : std::move(g);
  };
  std::vector<std::shared_ptr<Node>> ready;
  for (std::size_t i = 0; i < roots.size(); ++i) {
    accumulate(root_edges[i], grads[i]);
  }
  for (const Edge& e : root_edges)
    if (deps[e.node.get()] == 0) {
      bool queued = false;
      for (auto& r : ready) queued = queued || r == e.node;
      if (!queued) ready.push_back(e.node);
    }
  while (!ready.empty()) {
    std::shared_ptr<Node> n = std::move(ready.back());
    ready.pop_back();
    std::vector<Tensor> grad_out = std::move(buffers[n.get()]);
    buffers.erase(n.get());
    grad_out.resize(n->outputs().size());
    for (std::size_t i = 0; i < grad_out.size(); ++i)
      if (!grad_out[i].defined() && n->name() != "AccumulateGrad") {  // unused output
        const auto& info = n->outputs()[i];
        grad_out[i] = Tensor::zeros(info.sizes, info.dtype, info.device);
      }
    std::vector<Tensor> grad_in = n->apply(grad_out);
    grad_out.clear();  // let AccumulateGrad-bound buffers be exclusive
    if (!retain_graph) n->release();
    const auto& next = n->next();
    for (std::size_t i = 0; i < next.size() && i < grad_in.size(); ++i) {
      const Edge& e = next[i];
      if (!e.valid()) continue;
      if (grad_in[i].defined()) accumulate(e, std::move(grad_in[i]));
      if (--deps[e.node.get()] == 0) ready.push_back(e.node);
    }
  }
}

}  // namespace anvil
