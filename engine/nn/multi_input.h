// SPDX-License-Identifier: Apache-2.0
#pragma once
// nn::MultiInputModule<N>: the base of a module whose forward takes N tensors, written with a
// typed signature (Note [Multi-input modules]):
//   struct Scorer : nn::MultiInputModule<2> {
//     Tensor forward(const Tensor& query, const Tensor& key) override;
//     std::string type_name() const override { return "Scorer"; }
//   };
//   Tensor s = scorer->forward(q, k);   // or (*scorer)(q, k)
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/nn/module.h"

namespace anvil::nn {

// Note [Multi-input modules]
// Module::forward takes one tensor, and most of the engine (Sequential, the trainer, the model
// registry) relies on that. libtorch's Module has no forward at all: each module declares its
// own, and AnyModule erases the signature where a container needs to call it. anvil keeps the
// one-tensor virtual and adds two things:
//   - MultiInputModule<N> declares `Tensor forward(const Tensor&, ... N times)` as the module's
//     own pure virtual, so a module with two inputs is written, called and checked by the
//     compiler like any other: on the module's own type the one-tensor forward is hidden by the
//     N-tensor one, so calling it with one tensor does not compile.
//   - Module::forward_inputs(inputs) and Module::num_inputs() are the erased call, for code that
//     holds a ModulePtr: a MultiInputModule<N> takes exactly N tensors there, and its one-tensor
//     forward (reachable only through Module&) throws naming the module and the counts.
// Everything else a module is (parameters, children, train/eval, to(device), checkpoints,
// optimizers) does not depend on forward's arity, so a MultiInputModule sits in a model, is
// trained and saved as any module. A Sequential passes its inputs to its first layer, which may
// take several; a later layer must take one (Sequential::add refuses it otherwise).
namespace detail {
template <std::size_t>
using TensorInput = const Tensor&;  // one parameter of an N-tensor forward
}  // namespace detail

template <std::size_t N, typename Indices = std::make_index_sequence<N>>
class MultiInputModule;

// The module's N-tensor forward, with the erased forms defined from it.
template <std::size_t N, std::size_t... I>
class MultiInputModule<N, std::index_sequence<I...>> : public Module {
  static_assert(N >= 2, "a module with one input derives from nn::Module");

 public:
  // The computation, one tensor per input.
  virtual Tensor forward(detail::TensorInput<I>... inputs) = 0;
  Tensor operator()(detail::TensorInput<I>... inputs) { return forward(inputs...); }

  // Reachable only through Module& (the module's own type hides it): throws, naming the module.
  Tensor forward(const Tensor& x) final {
    (void)x;
    fail((type_name() + "::forward").c_str(), "takes ", N, " inputs, got 1 (call forward with ", N,
         " tensors, or forward_inputs)");
  }
  std::size_t num_inputs() const final { return N; }
  // Exactly N tensors, passed to forward in order.
  Tensor forward_inputs(const std::vector<Tensor>& inputs) final {
    ANVIL_CHECK(inputs.size() == N, (type_name() + "::forward_inputs").c_str(), "takes ", N,
                " inputs, got ", inputs.size());
    return forward(inputs[I]...);
  }
};

}  // namespace anvil::nn
