// SPDX-License-Identifier: Apache-2.0
// /proc/self/status and getrusage readers (process_stats.h).
#include "engine/core/process_stats.h"

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace anvil {

namespace {

// The value of a "Key:   123 kB" line of /proc/self/status, in bytes; -1 when absent.
double status_kb_field(const char* key) {
  std::ifstream status("/proc/self/status");
  const std::string prefix = std::string(key) + ":";
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(prefix, 0) == 0) return std::stod(line.substr(prefix.size())) * 1024.0;
  return -1.0;
}

}  // namespace

double current_rss_bytes() {
  const double rss = status_kb_field("VmRSS");
  return rss < 0 ? 0.0 : rss;
}

double peak_rss_bytes() {
  const double hwm = status_kb_field("VmHWM");
  if (hwm >= 0) return hwm;
  rusage u{};  // no procfs: the process-lifetime peak
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;
}

bool reset_peak_rss() {
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5";
  clear_refs.flush();
  return static_cast<bool>(clear_refs);
}

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

}  // namespace anvil
