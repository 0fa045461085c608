// SPDX-License-Identifier: Apache-2.0
#pragma once
// Learning-rate schedulers over every parameter group of an optimizer, with PyTorch's
// torch.optim.lr_scheduler semantics (closed forms, Note [Scheduler closed forms]):
//   optim::AdamW opt(net->parameters(), {.lr = 1e-3});
//   optim::CosineAnnealingLR sched(opt, /*t_max=*/1000);
//   for (...) { opt.zero_grad(); loss.backward(); opt.step(); sched.step(); }
// Building a scheduler records each group's current lr as its base lr and sets the lr of step 0
// (PyTorch's constructor does the same); step() advances one step and sets every group's lr.
// state_metadata()/load_state() let a checkpoint resume the schedule (engine/optim/checkpoint.h).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/optim/optimizer.h"

namespace anvil::optim {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& opt);
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances one step and sets every group's lr to lr_at(step, group's base lr).
  void step();
  // Steps taken since construction (PyTorch's last_epoch).
  std::int64_t last_step() const { return step_; }
  // The lr last set, per group (PyTorch's get_last_lr()).
  const std::vector<double>& last_lr() const { return last_lr_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  const Optimizer& optimizer() const { return *opt_; }
  // The schedule's lr at step t for a group whose base lr is `base`.
  virtual double lr_at(std::int64_t t, double base) const = 0;
  // "StepLR", "CosineAnnealingLR", "LinearWarmup": the type a saved state must match.
  virtual std::string type_name() const = 0;

  // ---- state for checkpoints -------------------------------------------------------------
  // "type", "step", "num_groups", "base_lr.<g>" and the options, doubles written so that they
  // read back to the same bits.
  std::map<std::string, std::string> state_metadata() const;
  // Checks `metadata` (type, group count, options) against this scheduler and throws
  // anvil::Error naming the problem, changing nothing; returns a handle that commit() applies.
  // load_checkpoint checks every part of a file before it commits any (Note [Transactional
  // checkpoint load]).
  struct Loaded {
    std::int64_t step = 0;
    std::vector<double> base_lrs;
    std::map<std::string, std::string> options;
  };
  Loaded check_state(const std::map<std::string, std::string>& metadata) const;
  // Restores a checked state and sets every group's lr to lr_at(step); cannot fail.
  void commit(const Loaded& state);
  // check_state then commit.
  void load_state(const std::map<std::string, std::string>& metadata);

  // The options as text ("gamma", "t_max", ...): check_options() parses and checks them
  // (throwing without changing anything), apply_options() sets checked ones.
  virtual std::map<std::string, std::string> options_metadata() const = 0;
  virtual void check_options(const std::map<std::string, std::string>& options) const = 0;
  virtual void apply_options(const std::map<std::string, std::string>& options) = 0;

 protected:
  // Sets the lr of step 0: the last call of a derived constructor.
  void start();

 private:
  void apply_lrs();
  Optimizer* opt_;
  std::int64_t step_ = 0;
  std::vector<double> base_lrs_, last_lr_;
};

// lr = base * gamma^floor(t / step_size)  (torch.optim.lr_scheduler.StepLR).
class StepLR final : public LRScheduler {
 public:
  StepLR(Optimizer& opt, std::int64_t step_size, double gamma = 0.1);
  double lr_at(std::int64_t t, double base) const override;
  std::string type_name() const override { return "StepLR"; }
  std::int64_t step_size() const { return step_size_; }
  double gamma() const { return gamma_; }

  std::map<std::string, std::string> options_metadata() const override;
  void check_options(const std::map<std::string, std::string>& options) const override;
  void apply_options(const std::map<std::string, std::string>& options) override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

// lr = base * gamma^(number of milestones <= t)  (torch.optim.lr_scheduler.MultiStepLR). The
// milestones are steps >= 1 in any order; as PyTorch's, a milestone given twice decays twice.
class MultiStepLR final : public LRScheduler {
 public:
  MultiStepLR(Optimizer& opt, std::vector<std::int64_t> milestones, double gamma = 0.1);
  double lr_at(std::int64_t t, double base) const override;
  std::string type_name() const override { return "MultiStepLR"; }
  const std::vector<std::int64_t>& milestones() const { return milestones_; }  // sorted
  double gamma() const { return gamma_; }

  std::map<std::string, std::string> options_metadata() const override;
  void check_options(const std::map<std::string, std::string>& options) const override;
  void apply_options(const std::map<std::string, std::string>& options) override;

 private:
  std::vector<std::int64_t> milestones_;
  double gamma_;
};

// lr = eta_min + (base - eta_min) * (1 + cos(pi * t / t_max)) / 2
// (torch.optim.lr_scheduler.CosineAnnealingLR's closed form; past t_max the cosine goes on).
class CosineAnnealingLR final : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, std::int64_t t_max, double eta_min = 0.0);
  double lr_at(std::int64_t t, double base) const override;
  std::string type_name() const override { return "CosineAnnealingLR"; }
  std::int64_t t_max() const { return t_max_; }
  double eta_min() const { return eta_min_; }

  std::map<std::string, std::string> options_metadata() const override;
  void check_options(const std::map<std::string, std::string>& options) const override;
  void apply_options(const std::map<std::string, std::string>& options) override;

 private:
  std::int64_t t_max_;
  double eta_min_;
};

// Linear warm-up: factor(t) = start_factor + (1 - start_factor) * min(t, warmup_steps) /
// warmup_steps, as torch.optim.lr_scheduler.LinearLR(start_factor, end_factor=1,
// total_iters=warmup_steps). Alone, lr = base * factor(t); around another schedule `after`
// (built first, on the same optimizer), lr = factor(t) * after.lr_at(t, base): PyTorch's
// ChainedScheduler([LinearLR(...), after]) for the multiplicative schedules (StepLR, and
// CosineAnnealingLR with eta_min 0). `after` is only read, never stepped.
class LinearWarmup final : public LRScheduler {
 public:
  LinearWarmup(Optimizer& opt, std::int64_t warmup_steps, double start_factor = 1.0 / 3.0,
               std::unique_ptr<LRScheduler> after = nullptr);
  double lr_at(std::int64_t t, double base) const override;
  std::string type_name() const override { return "LinearWarmup"; }
  std::int64_t warmup_steps() const { return warmup_steps_; }
  double start_factor() const { return start_factor_; }
  const LRScheduler* after() const { return after_.get(); }

  std::map<std::string, std::string> options_metadata() const override;
  void check_options(const std::map<std::string, std::string>& options) const override;
  void apply_options(const std::map<std::string, std::string>& options) override;

 private:
  double factor(std::int64_t t) const;
  std::int64_t warmup_steps_;
  double start_factor_;
  std::unique_ptr<LRScheduler> after_;
};

}  // namespace anvil::optim
