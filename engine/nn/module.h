// SPDX-License-Identifier: Apache-2.0
#pragma once
// nn::Module: named parameters, child modules, train/eval mode, shape and FLOP description.
// The API follows libtorch: `auto y = model->forward(x); loss.backward(); opt.step();`.
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/dispatch/op_problem.h"

namespace anvil::nn {

// A kernel problem a layer runs (a GEMM, convolution, pooling, batch norm or LSTM), named after
// the layer: "fcn5:fc1.forward", "resnet50:layer3.0.conv2", "lstm32:lstm.l0". op_name(problem)
// names its variant table.
struct NamedProblem {
  std::string name;
  OpProblem problem;
};

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
  // How many tensors forward takes: 1, or N for a MultiInputModule<N> (engine/nn/multi_input.h),
  // or a Sequential's first layer's.
  virtual std::size_t num_inputs() const { return 1; }
  // forward for code that holds a Module& and cannot call a typed N-input forward (Note
  // [Multi-input modules]): here exactly one tensor, passed to forward; throws
  // "<type>::forward_inputs: takes 1 input, got <n>" otherwise.
  virtual Tensor forward_inputs(const std::vector<Tensor>& inputs);

  // "Linear", "Sequential", ...
  virtual std::string type_name() const = 0;
  // Constructor arguments for printing ("in=784, out=512, bias=true").
  virtual std::string extra_repr() const { return {}; }
  // Output shape for an input of shape `in` (batch dim included); identity by default.
  virtual Shape output_shape(const Shape& in) const { return in; }
  // Forward FLOPs for an input of shape `in` (multiply-add = 2 FLOPs); 0 by default.
  virtual double forward_flops(const Shape& in) const {
    (void)in;
    return 0.0;
  }
  // Appends the kernel problems of this module for input `in`, in forward order, names prefixed
  // by `prefix`: a Linear's forward, input-gradient and weight-gradient GEMMs, a convolution's,
  // pooling's, batch norm's or LSTM layer's table problem. Containers recurse into children.
  virtual void problems(const Shape& in, const std::string& prefix,
                        std::vector<NamedProblem>& out) const {
    (void)in;
    (void)prefix;
    (void)out;
  }

  // Note [Sequence-model hooks]
  // What a training loop needs from a sequence model, asked of any module so that no loop
  // downcasts to a concrete model: a language model carries its recurrent state from one call of
  // forward to the next (truncated BPTT), and the loop resets it where a stream of windows starts
  // and ends (epochs, evaluation); and it may compute its training loss for next-token targets
  // more cheaply than loss(forward(ids)) (models::LstmLanguageModel runs its decoder and the
  // cross-entropy as one node: Note [Linear cross-entropy]), which models::model_forward_loss
  // then takes. A module without state or fused loss keeps the defaults.
  //
  // Drops the state carried between calls; the default resets every child's.
  virtual void reset_state();
  // Whether sequence_loss is available (false by default).
  virtual bool has_sequence_loss() const { return false; }
  // The training loss for token ids [B, T] and next-token targets [B, T] (networks.md's: the
  // cross-entropy summed over T, averaged over B); throws unless has_sequence_loss().
  virtual Tensor sequence_loss(const Tensor& ids, const Tensor& targets);

  // Parameters of this module and its children, named "0.weight", "fc1.bias", ...
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::int64_t num_parameters() const;
  // State that is saved with the parameters but never trained (batch norm's running
  // statistics), named like parameters.
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }
  // State beyond tensors that an exact resume needs (a Dropout layer's own generator), as text,
  // named like parameters ("drop1.generator"); checkpoints store it as metadata.
  std::vector<std::pair<std::string, std::string>> named_extra_state() const;
  // Checks that `state` (name -> text) holds a valid entry for every name of
  // named_extra_state() (e.g. a parsable generator text) without changing anything; throws
  // naming the first missing or invalid entry. Entries the model does not have are ignored.
  void check_extra_state(const std::map<std::string, std::string>& state) const;
  // Restores every entry of named_extra_state() from `state`. Calls check_extra_state first, so
  // on an error nothing is changed (Note [Transactional checkpoint load] in checkpoint.cpp).
  void load_extra_state(const std::map<std::string, std::string>& state);

  // Training mode (dropout active) for this module and its children.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Sets every parameter's gradient to undefined (the cheapest "zero").
  void zero_grad();
  // Moves parameters to `device` in place (the Tensor handles held by optimizers stay valid
  // only if the optimizer is created after this call).
  void to(Device device);

  // Multi-line description: one line per module with its extra_repr.
  std::string str() const;

 protected:
  // Adds a parameter (a leaf that requires grad).
  void register_parameter(std::string name, Tensor value);
  // The stored handle of a parameter of this module (stable once registration is over).
  Tensor& parameter(const std::string& name);
  // Adds a buffer (no gradient); `buffer(name)` is its stable handle, updated in place.
  void register_buffer(std::string name, Tensor value);
  Tensor& buffer(const std::string& name);
  // This module's own extra state (not its children's): key -> text, and its restore. Modules
  // with such state override both; the default has none.
  // validate_extra_state throws when set_extra_state(key, value) would (changing nothing), so
  // that set_extra_state cannot fail once every entry was validated.
  virtual std::vector<std::pair<std::string, std::string>> extra_state() const { return {}; }
  virtual void validate_extra_state(const std::string& key, const std::string& value) const;
  virtual void set_extra_state(const std::string& key, const std::string& value);
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    children_.emplace_back(std::move(name), module);
    return module;
  }

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;
  void collect_buffers(const std::string& prefix,
                       std::vector<std::pair<std::string, Tensor>>& out) const;
  void describe(std::string& out, const std::string& name, int depth) const;
  // check_extra_state's second half: every entry's text, named "<prefix><key>" in messages.
  void check_extra_state_values(const std::map<std::string, std::string>& state,
                                const std::string& prefix) const;

  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

using ModulePtr = std::shared_ptr<Module>;

}  // namespace anvil::nn
