#pragma once
// Optimizers over a list of parameter tensors: SGD (momentum, dampening, weight decay,
// Nesterov) and Adam; global-norm gradient clipping. Usage as in libtorch:
//   opt.zero_grad(); loss.backward(); opt.step();
// Updates run under NoGradGuard, in place, as fused passes over each parameter (one read of
// the gradient, one read-modify-write of the parameter and its state).
#include <vector>

#include "engine/core/tensor.h"

namespace anvil::optim {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  // Sets every gradient to undefined (no memory traffic); set_to_none=false zeroes in place.
  void zero_grad(bool set_to_none = true);
  const std::vector<Tensor>& params() const { return params_; }
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;

 protected:
  std::vector<Tensor> params_;
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD final : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  SGD(std::vector<Tensor> params, double lr) : SGD(std::move(params), SGDOptions{lr}) {}
  void step() override;
  double lr() const override { return opt_.lr; }
  void set_lr(double lr) override;
  const SGDOptions& options() const { return opt_; }
  // Lets backward apply this optimizer's update where it can fold it into a GEMM
  // (Note [Folded SGD]); step() then updates only the parameters that still got a gradient.
  // Plain SGD only: throws with momentum, weight decay or Nesterov. off = ordinary gradients.
  void fold_into_backward(bool on = true);
  bool folded() const { return folded_; }

 private:
  SGDOptions opt_;
  bool folded_ = false;
  std::vector<Tensor> momentum_;  // per parameter, created on the first step
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // L2 added to the gradient, as torch.optim.Adam
};

class Adam final : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options);
  void step() override;
  double lr() const override { return opt_.lr; }
  void set_lr(double lr) override { opt_.lr = lr; }
  std::int64_t steps() const { return t_; }

 private:
  AdamOptions opt_;
  std::int64_t t_ = 0;
  std::vector<Tensor> m_, v_;
};

// Scales all gradients so that their global L2 norm is at most max_norm; returns the norm
// before clipping.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

}  // namespace anvil::optim
