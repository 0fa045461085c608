// SPDX-License-Identifier: Apache-2.0
#pragma once
// The basic layers: Linear, activations, Dropout, Flatten and the Sequential container.
#include <concepts>
#include <initializer_list>
#include <optional>
#include <type_traits>
#include <utility>

#include "engine/core/random.h"
#include "engine/nn/module.h"

namespace anvil::nn {

// y = x W^T + b with W [out, in] (PyTorch layout, Note [Linear layout]).
// Default init as PyTorch: W, b ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear final : public Module {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true,
         Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;
  Shape output_shape(const Shape& in) const override;
  double forward_flops(const Shape& in) const override;
  void problems(const Shape& in, const std::string& prefix,
                std::vector<NamedProblem>& out) const override;

  Tensor& weight() { return *weight_; }
  Tensor& bias() { return *bias_; }
  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }

 private:
  std::int64_t in_, out_;
  Tensor* weight_ = nullptr;
  Tensor* bias_ = nullptr;
  Tensor no_bias_;
};

enum class Activation { sigmoid, tanh, relu };

// A parameter-free pointwise activation.
class ActivationLayer final : public Module {
 public:
  explicit ActivationLayer(Activation kind) : kind_(kind) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override;
  double forward_flops(const Shape& in) const override;

 private:
  Activation kind_;
};

inline std::shared_ptr<ActivationLayer> Sigmoid() {
  return std::make_shared<ActivationLayer>(Activation::sigmoid);
}
inline std::shared_ptr<ActivationLayer> Tanh() {
  return std::make_shared<ActivationLayer>(Activation::tanh);
}
inline std::shared_ptr<ActivationLayer> ReLU() {
  return std::make_shared<ActivationLayer>(Activation::relu);
}

// Draws its masks from its own Generator, seeded from `seed_from` at construction (so a model
// built from a seed drops the same units every run), or from the default generator when null.
class Dropout final : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator* seed_from = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;

 protected:
  // "generator": the mask generator's state, when the layer has its own (resume, checkpoints).
  std::vector<std::pair<std::string, std::string>> extra_state() const override;
  void validate_extra_state(const std::string& key, const std::string& value) const override;
  void set_extra_state(const std::string& key, const std::string& value) override;

 private:
  double p_;
  std::optional<Generator> gen_;
};

// Flattens every dim after the batch dim.
class Flatten final : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.flatten(1); }
  std::string type_name() const override { return "Flatten"; }
  Shape output_shape(const Shape& in) const override;
};

class Sequential final : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<ModulePtr> layers);
  // Sequential(a, b, c), as libtorch's: the layers in order, named "0", "1", ...; unlike the
  // braced list it works through std::make_shared<Sequential>(a, b, c), which cannot deduce a
  // braced list. Only module pointers (any shared_ptr<Layer>) are taken.
  template <typename... Layers>
  requires(sizeof...(Layers) > 0 && (std::is_convertible_v<Layers&&, ModulePtr> &&
                                     ...)) explicit Sequential(Layers&&... layers) {
    (add(ModulePtr(std::forward<Layers>(layers))), ...);
  }
  // Appends a layer named by its position ("0", "1", ...) unless a name is given. Only the first
  // layer may take several inputs (num_inputs() > 1); a later one is refused.
  Sequential& add(ModulePtr layer, std::string name = {});
  Tensor forward(const Tensor& x) override;
  // The inputs go to the first layer (forward_inputs), its output through the others: a
  // Sequential whose first layer is a MultiInputModule<2> is called as seq->forward(a, b).
  template <std::same_as<Tensor>... More>
  Tensor forward(const Tensor& a, const Tensor& b, const More&... more) {
    return forward_inputs({a, b, more...});
  }
  Tensor forward_inputs(const std::vector<Tensor>& inputs) override;
  // The first layer's (1 when empty).
  std::size_t num_inputs() const override;
  std::string type_name() const override { return "Sequential"; }
  Shape output_shape(const Shape& in) const override;
  double forward_flops(const Shape& in) const override;
  void problems(const Shape& in, const std::string& prefix,
                std::vector<NamedProblem>& out) const override;
  std::size_t size() const { return children().size(); }
};

}  // namespace anvil::nn
