// SPDX-License-Identifier: Apache-2.0
#pragma once
// Note [Test fault hook]
// The distributed fault tests (tests/distributed/test_dist_train_faults.sh) need one rank of a
// real `anvil train` job to fail or hang in the middle of training, after the first collective,
// at a step they choose. ANVIL_TEST_FAULT=KIND@RANK:STEP does that: before its training step
// STEP (1-based, counted over this run's epochs), rank RANK either throws an ordinary
// anvil::Error (KIND error: a failure of that rank alone, as a bad batch or a full disk) or stops
// itself with SIGSTOP (KIND stall: alive but unresponsive, as a rank stuck in a driver). For
// tests only: unset, it costs one comparison per step. A malformed value is refused with
// anvil::ConfigError naming the variable.
#include <cstdint>
#include <string>

namespace anvil::tools {

class FaultHook {
 public:
  // ANVIL_TEST_FAULT as this rank sees it (off when unset or meant for another rank).
  static FaultHook from_env(int rank);
  // Called before every training step: fails or stalls at the chosen one.
  void before_step() {
    if (step_ > 0 && ++seen_ == step_) fire();
  }

 private:
  void fire() const;
  std::string kind_;  // "error" or "stall"
  int rank_ = 0;
  std::int64_t step_ = 0;  // 0: off
  std::int64_t seen_ = 0;
};

}  // namespace anvil::tools
