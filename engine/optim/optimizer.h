// SPDX-License-Identifier: Apache-2.0
#pragma once
// Optimizers over parameter tensors: SGD (momentum, dampening, weight decay, Nesterov), Adam
// and AdamW (decoupled weight decay); global-norm gradient clipping. Usage as in libtorch:
//   opt.zero_grad(); loss.backward(); opt.step();
// Parameter groups (PyTorch's param_groups) give parts of a model their own options, e.g. no
// weight decay on biases and batch-norm parameters:
//   optim::AdamW opt({{.params = weights}, {.params = biases, .options = no_decay}}, defaults);
// Learning-rate schedulers act on every group (engine/optim/lr_scheduler.h).
// Updates run under NoGradGuard, in place, as fused passes over each parameter (one read of
// the gradient, one read-modify-write of the parameter and its state).
// state()/state_metadata()/load_state() export and restore everything a resumed run needs to
// continue bit-exactly (engine/optim/checkpoint.h writes them to a file).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/tensor.h"

namespace anvil::optim {

// Parameters that share options: `options` unset takes the optimizer's defaults (the second
// constructor argument), as a group without options in libtorch.
template <typename Options>
struct ParamGroup {
  std::vector<Tensor> params;
  std::optional<Options> options;
};

class Optimizer {
 public:
  // One group holding `params`.
  explicit Optimizer(std::vector<Tensor> params);
  // Several groups (at least one; a parameter in two groups is refused). params() is their
  // concatenation in order, and parameter indices (state names, checkpoints) count over it.
  explicit Optimizer(std::vector<std::vector<Tensor>> groups);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  // Sets every gradient to undefined (no memory traffic); set_to_none=false zeroes in place.
  void zero_grad(bool set_to_none = true);
  const std::vector<Tensor>& params() const { return params_; }

  // ---- parameter groups ----------------------------------------------------------------
  std::size_t num_groups() const { return group_begin_.size() - 1; }
  // Group g is params()[group_begin(g), group_begin(g + 1)).
  std::size_t group_begin(std::size_t g) const;
  std::vector<Tensor> group_params(std::size_t g) const;
  virtual double group_lr(std::size_t g) const = 0;
  // Throws anvil::Error for a negative or non-finite lr or a group out of range.
  virtual void set_group_lr(std::size_t g, double lr) = 0;
  // The first group's lr; set_lr sets every group's (one-group code and the CLI use these).
  double lr() const { return group_lr(0); }
  void set_lr(double lr);

  // ---- state for checkpoints (Note [Optimizer state]) ---------------------------------
  // "SGD", "Adam", "AdamW": the type a saved state must match.
  virtual std::string type_name() const = 0;
  // Per-parameter tensors, named "<type>.<what>.<parameter index>" ("adam.m.3",
  // "sgd.momentum.0"); a parameter whose state does not exist yet has no entry. The tensors are
  // the optimizer's own (not copies): save them before the next step.
  virtual std::vector<std::pair<std::string, Tensor>> state() const = 0;
  // Scalars as text: "type", "num_params", "num_groups", every group's options (group 0 as
  // "lr", "momentum", ...; group g > 0 as "group.<g>.lr", ...; with several groups also
  // "group.<g>.num_params") and counters ("step", Adam's "adam.step.<i>"); doubles are written so
  // that they read back to the same bits (Note [Group state keys]).
  virtual std::map<std::string, std::string> state_metadata() const = 0;
  // Restores what state() and state_metadata() returned, options included (as
  // torch.optim.Optimizer.load_state_dict; call set_lr afterwards to override the rate).
  // Checks the type, the parameter and group counts and every tensor's name, shape and dtype
  // against this optimizer's parameters first, and throws anvil::Error leaving the optimizer
  // unchanged.
  virtual void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                          const std::map<std::string, std::string>& metadata) = 0;

 protected:
  // Shared by load_state: checks "type", "num_params", "num_groups" and the groups' sizes.
  void check_state_header(const std::map<std::string, std::string>& metadata) const;
  // Shared by state_metadata: the keys check_state_header reads.
  std::map<std::string, std::string> state_header() const;
  // The key prefix of group g's options: "" for group 0, "group.<g>." after it.
  static std::string group_prefix(std::size_t g);
  // Throws unless g < num_groups() and lr is finite and >= 0.
  void check_group_lr(std::size_t g, double lr, const char* where) const;
  // Appends a group (add_param_group): throws naming `where`, changing nothing, for an undefined
  // parameter or one already in a group.
  void append_group(std::vector<Tensor> params, const char* where);
  std::vector<Tensor> params_;
  std::vector<std::size_t> group_begin_;  // num_groups() + 1 offsets into params_
  std::vector<std::size_t> group_of_;     // the group of each parameter
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
  SGD(std::vector<ParamGroup<SGDOptions>> groups, SGDOptions defaults);
  // torch.optim.Optimizer.add_param_group: a group added after construction (options unset:
  // the constructor's defaults, or its options for the one-list constructor). Its parameters
  // start without momentum buffers; on a folded optimizer the group must be plain SGD and is
  // folded too. A scheduler built before refuses to step until it is rebuilt.
  void add_param_group(ParamGroup<SGDOptions> group);
  void step() override;
  double group_lr(std::size_t g) const override { return groups_.at(g).lr; }
  void set_group_lr(std::size_t g, double lr) override;
  // The first group's options; group_options(g) any group's.
  const SGDOptions& options() const { return groups_[0]; }
  const SGDOptions& group_options(std::size_t g) const { return groups_.at(g); }
  // Lets backward apply this optimizer's update where it can fold it into a GEMM
  // (Note [Folded SGD]); step() then updates only the parameters that still got a gradient.
  // Plain SGD only: throws with momentum, weight decay or Nesterov in any group. off = ordinary
  // gradients.
  void fold_into_backward(bool on = true);
  bool folded() const { return folded_; }
  std::string type_name() const override { return "SGD"; }
  std::vector<std::pair<std::string, Tensor>> state() const override;
  std::map<std::string, std::string> state_metadata() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                  const std::map<std::string, std::string>& metadata) override;

 private:
  std::vector<SGDOptions> groups_;  // per group
  SGDOptions defaults_;             // for add_param_group
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

// torch.optim.AdamW's defaults: as Adam's but weight_decay 1e-2, and the decay is decoupled
// from the gradient (Note [Decoupled weight decay]).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;  // p *= 1 - lr * weight_decay before each update
};

// The update of Adam and AdamW; the two differ only in how weight decay enters, a flag of the
// update problem (OptimizerProblem::decoupled_decay), not a second set of kernels. Each parameter
// keeps its own step count, as PyTorch's state['step'] (Note [Per-parameter Adam steps]).
class AdamBase : public Optimizer {
 public:
  void step() override;
  // Calls of step(), whatever each parameter did in them.
  std::int64_t steps() const { return t_; }
  // The steps parameter i (an index into params()) has taken: the steps in which it had a
  // gradient, and so the t of its bias corrections. 0 before its first update.
  std::int64_t param_steps(std::size_t i) const;
  double group_lr(std::size_t g) const override { return groups_.at(g).lr; }
  void set_group_lr(std::size_t g, double lr) override;
  std::vector<std::pair<std::string, Tensor>> state() const override;
  std::map<std::string, std::string> state_metadata() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                  const std::map<std::string, std::string>& metadata) override;

 protected:
  AdamBase(std::vector<std::vector<Tensor>> params, std::vector<AdamOptions> groups,
           bool decoupled_decay);
  // add_param_group of Adam and AdamW: the group's parameters start with no state, step 0.
  void add_group(std::vector<Tensor> params, const AdamOptions& options);
  std::vector<AdamOptions> groups_;  // per group (AdamW's as AdamOptions: the same fields)

 private:
  bool decoupled_decay_;
  std::int64_t t_ = 0;
  std::vector<Tensor> m_, v_;
  std::vector<std::int64_t> param_steps_;  // per parameter (Note [Per-parameter Adam steps])
};

// torch.optim.Adam: weight decay is L2 added to the gradient.
class Adam final : public AdamBase {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options);
  Adam(std::vector<ParamGroup<AdamOptions>> groups, AdamOptions defaults);
  // torch.optim.Optimizer.add_param_group: a group added after construction (options unset:
  // the constructor's defaults, or its options for the one-list constructor). Its parameters
  // start with no state and count their own steps from 0. A scheduler built before refuses to
  // step until it is rebuilt (it holds one base lr per group).
  void add_param_group(ParamGroup<AdamOptions> group);
  const AdamOptions& options() const { return groups_[0]; }
  const AdamOptions& group_options(std::size_t g) const { return groups_.at(g); }
  std::string type_name() const override { return "Adam"; }

 private:
  AdamOptions defaults_;
};

// torch.optim.AdamW: p *= 1 - lr * weight_decay, then Adam's update without decay.
class AdamW final : public AdamBase {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options);
  AdamW(std::vector<ParamGroup<AdamWOptions>> groups, AdamWOptions defaults);
  // As Adam::add_param_group.
  void add_param_group(ParamGroup<AdamWOptions> group);
  AdamWOptions options() const { return group_options(0); }
  AdamWOptions group_options(std::size_t g) const;
  std::string type_name() const override { return "AdamW"; }

 private:
  AdamWOptions defaults_;
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
