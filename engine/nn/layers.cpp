// SPDX-License-Identifier: Apache-2.0
// Linear, activations, Dropout, Flatten, Sequential (engine/nn/layers.h).
#include "engine/nn/layers.h"

#include <cmath>

#include "engine/autograd/functions.h"
#include "engine/nn/init.h"

namespace anvil::nn {

Linear::Linear(std::int64_t in, std::int64_t out, bool bias, Generator* gen) : in_(in), out_(out) {
  ANVIL_CHECK(in > 0 && out > 0, "Linear", "features must be positive, got in=", in, ", out=", out);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  register_parameter("weight", uniform({out, in}, -bound, bound, DType::f32, gen));
  if (bias) register_parameter("bias", uniform({out}, -bound, bound, DType::f32, gen));
  // Pointers are taken after all registrations (the parameter list may reallocate before).
  weight_ = &parameter("weight");
  bias_ = bias ? &parameter("bias") : &no_bias_;
}

Tensor Linear::forward(const Tensor& x) { return linear(x, *weight_, *bias_); }

std::string Linear::extra_repr() const {
  return detail::str_cat("in=", in_, ", out=", out_,
                         ", bias=", bias_->defined() ? "true" : "false");
}

Shape Linear::output_shape(const Shape& in) const {
  ANVIL_CHECK(!in.empty() && in.back() == in_, "Linear", "input shape ", shape_str(in),
              " does not end in ", in_);
  Shape out = in;
  out.back() = out_;
  return out;
}

double Linear::forward_flops(const Shape& in) const {
  const std::int64_t rows_i = shape_numel(in) / in_;  // in's leading dimensions, exactly
  const double rows = static_cast<double>(rows_i);
  return rows * (2.0 * in_ * out_ + (bias_->defined() ? out_ : 0));
}

void Linear::problems(const Shape& in, const std::string& prefix,
                      std::vector<NamedProblem>& out) const {
  const std::int64_t rows = shape_numel(in) / in_;
  // Note [Linear layout]: forward NT, input gradient NN, weight gradient TN.
  GemmProblem fwd = GemmProblem::dense(rows, out_, in_, false, true);
  fwd.beta_zero = !bias_->defined();  // the bias is pre-written into y (beta = 1)
  out.push_back({prefix + "forward", fwd});
  out.push_back({prefix + "grad_input", GemmProblem::dense(rows, in_, out_, false, false)});
  out.push_back({prefix + "grad_weight", GemmProblem::dense(out_, in_, rows, true, false)});
}

Tensor ActivationLayer::forward(const Tensor& x) {
  switch (kind_) {
    case Activation::sigmoid:
      return sigmoid(x);
    case Activation::tanh:
      return tanh(x);
    case Activation::relu:
      return relu(x);
  }
  return x;
}

std::string ActivationLayer::type_name() const {
  switch (kind_) {
    case Activation::sigmoid:
      return "Sigmoid";
    case Activation::tanh:
      return "Tanh";
    case Activation::relu:
      return "ReLU";
  }
  return "?";
}

double ActivationLayer::forward_flops(const Shape& in) const {
  return static_cast<double>(shape_numel(in));  // one "op" per element, as usual in summaries
}

Dropout::Dropout(double p, Generator* seed_from) : p_(p) {
  if (seed_from != nullptr) gen_.emplace(seed_from->next());
  ANVIL_CHECK(p >= 0.0 && p < 1.0, "Dropout", "probability must be in [0, 1), got ", p);
}
Tensor Dropout::forward(const Tensor& x) {
  return dropout(x, p_, is_training(), gen_ ? &*gen_ : nullptr);
}
std::string Dropout::extra_repr() const { return detail::str_cat("p=", p_); }
std::vector<std::pair<std::string, std::string>> Dropout::extra_state() const {
  if (!gen_) return {};
  return {{"generator", gen_->state()}};
}
void Dropout::validate_extra_state(const std::string& key, const std::string& value) const {
  ANVIL_CHECK(gen_ && key == "generator", "Dropout::set_extra_state", "unknown state '", key, "'");
  Generator probe;
  probe.set_state(value);  // throws for a text that is not a generator state
}
void Dropout::set_extra_state(const std::string& key, const std::string& value) {
  validate_extra_state(key, value);
  gen_->set_state(value);
}

Shape Flatten::output_shape(const Shape& in) const {
  ANVIL_CHECK(!in.empty(), "Flatten", "needs a batch dimension");
  return {in[0], shape_numel(in) / std::max<std::int64_t>(in[0], 1)};
}

Sequential::Sequential(std::initializer_list<ModulePtr> layers) {
  for (const auto& l : layers) add(l);
}

Sequential& Sequential::add(ModulePtr layer, std::string name) {
  ANVIL_CHECK(layer != nullptr, "Sequential::add", "null layer");
  // Later layers get the previous one's single output (Note [Multi-input modules]).
  ANVIL_CHECK(children().empty() || layer->num_inputs() == 1, "Sequential::add", "layer ",
              children().size(), " (", layer->type_name(), ") takes ", layer->num_inputs(),
              " inputs; only the first layer of a Sequential may take several");
  if (name.empty()) name = std::to_string(children().size());
  register_module(std::move(name), std::move(layer));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& [name, m] : children()) h = m->forward(h);
  return h;
}

Tensor Sequential::forward_inputs(const std::vector<Tensor>& inputs) {
  if (children().empty()) return Module::forward_inputs(inputs);  // the identity of one input
  Tensor h = children().front().second->forward_inputs(inputs);
  for (std::size_t i = 1; i < children().size(); ++i) h = children()[i].second->forward(h);
  return h;
}

std::size_t Sequential::num_inputs() const {
  return children().empty() ? 1 : children().front().second->num_inputs();
}

Shape Sequential::output_shape(const Shape& in) const {
  Shape s = in;
  for (const auto& [name, m] : children()) s = m->output_shape(s);
  return s;
}

double Sequential::forward_flops(const Shape& in) const {
  double f = 0;
  Shape s = in;
  for (const auto& [name, m] : children()) {
    f += m->forward_flops(s);
    s = m->output_shape(s);
  }
  return f;
}

void Sequential::problems(const Shape& in, const std::string& prefix,
                          std::vector<NamedProblem>& out) const {
  Shape s = in;
  for (const auto& [name, m] : children()) {
    m->problems(s, prefix + name + ".", out);
    s = m->output_shape(s);
  }
}

}  // namespace anvil::nn
