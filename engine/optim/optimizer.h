// SPDX-License-Identifier: Apache-2.0
#pragma once
// Optimizers over a list of parameter tensors: SGD (momentum, dampening, weight decay,
// Nesterov) and Adam; global-norm gradient clipping. Usage as in libtorch:
//   opt.zero_grad(); loss.backward(); opt.step();
// Updates run under NoGradGuard, in place, as fused passes over each parameter (one read of
// the gradient, one read-modify-write of the parameter and its state).
// state()/state_metadata()/load_state() export and restore everything a resumed run needs to
// continue bit-exactly (engine/optim/checkpoint.h writes them to a file).
#include <map>
#include <string>
#include <utility>
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

  // ---- state for checkpoints (Note [Optimizer state]) ---------------------------------
  // "SGD", "Adam": the type a saved state must match.
  virtual std::string type_name() const = 0;
  // Per-parameter tensors, named "<type>.<what>.<parameter index>" ("adam.m.3",
  // "sgd.momentum.0"); a parameter whose state does not exist yet has no entry. The tensors are
  // the optimizer's own (not copies): save them before the next step.
  virtual std::vector<std::pair<std::string, Tensor>> state() const = 0;
  // Scalars as text: "type", "num_params", every option ("lr", "momentum", ...) and counters
  // ("step"); doubles are written so that they read back to the same bits.
  virtual std::map<std::string, std::string> state_metadata() const = 0;
  // Restores what state() and state_metadata() returned, options included (as
  // torch.optim.Optimizer.load_state_dict; call set_lr afterwards to override the rate).
  // Checks the type, the parameter count and every tensor's name, shape and dtype against
  // this optimizer's parameters first, and throws anvil::Error leaving the optimizer unchanged.
  virtual void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                          const std::map<std::string, std::string>& metadata) = 0;

 protected:
  // Shared by load_state: checks "type" and "num_params" of `metadata`.
  void check_state_header(const std::map<std::string, std::string>& metadata) const;
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
  std::string type_name() const override { return "SGD"; }
  std::vector<std::pair<std::string, Tensor>> state() const override;
  std::map<std::string, std::string> state_metadata() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                  const std::map<std::string, std::string>& metadata) override;

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
  const AdamOptions& options() const { return opt_; }
  std::string type_name() const override { return "Adam"; }
  std::vector<std::pair<std::string, Tensor>> state() const override;
  std::map<std::string, std::string> state_metadata() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                  const std::map<std::string, std::string>& metadata) override;

 private:
  AdamOptions opt_;
  std::int64_t t_ = 0;
  std::vector<Tensor> m_, v_;
};

// Scales all gradients so that their global L2 norm is at most max_norm; returns the norm
// before clipping.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);
// The same clipping without a host wait when every gradient is dense and on one CUDA device:
// the norm is computed, and the gradients scaled, on the device (Note [Host waits in a step]
// in kernels/cuda/host_waits.h). Returns the norm before clipping as a 0-d f64 tensor on the
// gradients' device (read it with item() only when needed). Otherwise (CPU, several devices,
// strided gradients) it runs clip_grad_norm_ and returns the norm as a CPU scalar.
Tensor clip_grad_norm_async_(const std::vector<Tensor>& params, double max_norm);
// Loss scaling's unscale-and-check pass (Note [Dynamic loss scaling] in grad_scaler.h): every
// gradient *= factor in place, and in the same pass a flag per device records whether any result
// is inf or NaN. Returns the flags, 0-d f32 tensors on the gradients' devices (1 = found), in
// order of first appearance; nothing waits for the device until they are read.
std::vector<Tensor> unscale_grads_(const std::vector<Tensor>& params, double factor);

}  // namespace anvil::optim
