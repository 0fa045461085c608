// SPDX-License-Identifier: Apache-2.0
// The autotune trial timer (engine/dispatch/trial_timer.h, Note [Trial timer]).
#include "engine/dispatch/trial_timer.h"

#include <chrono>

#include "engine/core/cuda_backend.h"

namespace anvil {

double time_trial(const Device& device, const std::function<void()>& run, const char* where) {
  if (device.is_cuda()) return require_cuda(where).time_on_stream(device.index, run);
  const auto t0 = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace anvil
