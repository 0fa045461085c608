// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the operating system says about this process: resident memory (current and peak) and CPU
// time. Used by the benchmarks (peak memory of a step) and by `anvil train` (memory per epoch,
// CPU utilisation). Linux /proc first; getrusage where /proc is missing.
#include <string>

namespace anvil {

// Resident set size now (VmRSS), in bytes; 0 where the system does not say.
double current_rss_bytes();
// Peak resident set size since the last reset_peak_rss() (VmHWM), in bytes; without /proc the
// process-lifetime peak (getrusage).
double peak_rss_bytes();
// Resets the kernel's RSS high-water mark to the current RSS (writes 5 to /proc/self/clear_refs).
// Returns false where the kernel does not allow it; peak_rss_bytes() is then the process peak.
bool reset_peak_rss();
// The CPU's model name from /proc/cpuinfo ("unknown" where it is not there).
std::string cpu_model_name();
// User + system CPU seconds of all threads of the process so far.
double process_cpu_seconds();

}  // namespace anvil
