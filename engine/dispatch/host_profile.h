// SPDX-License-Identifier: Apache-2.0
// Host time per dispatched variant (Note [Host profile]).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace anvil {

// Note [Host profile]
// Where does a step's host time go? On a GPU a training step's host thread only dispatches and
// enqueues (Note [Host enqueue time]); when that time approaches the step's time the GPU waits
// for the host, and the question is which ops cost it: cuDNN's or cuBLAS's own host work, kernel
// launches, allocation, or anvil's code between the kernels (autograd, tensor bookkeeping).
// ANVIL_VERBOSE=host_profile (read once, when the first variant is registered) wraps the function
// of every registered variant in a host-clock timer that counts, per (op, variant), the calls,
// the inclusive time and the exclusive time (less the variants it called itself, such as the GEMMs
// inside an LSTM variant). The time between the variants (a step's host time less the sum of
// exclusive times) is anvil's own overhead outside the kernels. Off, it costs nothing: the
// functions are registered unwrapped. Benchmarks print the table per row (bench/model_bench.cpp).
// The lent GPU machines have no nsys or perf, so this is how their host time is attributed.

struct HostProfileSlot {
  std::atomic<std::int64_t> calls{0};
  std::atomic<std::int64_t> inclusive_ns{0};
  std::atomic<std::int64_t> exclusive_ns{0};
};

struct HostProfileRow {
  std::string op, variant;
  std::int64_t calls = 0;
  double inclusive_s = 0, exclusive_s = 0;
};

// True when ANVIL_VERBOSE names host_profile.
bool host_profile_enabled();

// The counters of (op, variant), created on first use; valid until the process ends.
HostProfileSlot* host_profile_slot(const std::string& op, const std::string& variant);

// Times one call into `slot` on the calling thread (nested scopes subtract from their parent's
// exclusive time).
class HostProfileScope {
 public:
  explicit HostProfileScope(HostProfileSlot* slot);
  ~HostProfileScope();
  HostProfileScope(const HostProfileScope&) = delete;
  HostProfileScope& operator=(const HostProfileScope&) = delete;

 private:
  HostProfileSlot* slot_;
  HostProfileScope* parent_;
  std::int64_t start_ns_;
  std::int64_t child_ns_ = 0;
};

// Every (op, variant) called since the last reset, most exclusive time first.
std::vector<HostProfileRow> host_profile_rows();
void host_profile_reset();

// The rows as a text table, times divided by `per` (e.g. the number of steps), with a total line.
std::string host_profile_table(const std::vector<HostProfileRow>& rows, double per);

}  // namespace anvil
