// SPDX-License-Identifier: Apache-2.0
// Threads and knobs (engine/core/config.h).
#include "engine/core/config.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/parse_number.h"

namespace anvil {
namespace {
std::mutex& setters_mutex() {
  static std::mutex mu;
  return mu;
}
std::vector<std::function<void(int)>>& setters() {
  static std::vector<std::function<void(int)>> s;
  return s;
}
// The thread count before any set_num_threads(): ANVIL_NUM_THREADS, else OpenMP's default
// (OMP_NUM_THREADS or the hardware threads). Both are held to max_threads(), so that a huge
// count is refused with its variable's name instead of crashing libgomp's thread creation.
int default_threads() {
  const std::string env = env_or_empty("ANVIL_NUM_THREADS");
  if (!env.empty()) {
    const auto v = parse_number<int>(env);
    ANVIL_CHECK_CONFIG(v && *v >= 1 && *v <= max_threads(), "ANVIL_NUM_THREADS",
                       "expected a thread count in [1, ", max_threads(), "] (",
                       thread_limit_reason(), "), got '", env, "'");
    omp_set_num_threads(*v);
    return *v;
  }
  const int omp = omp_get_max_threads();
  ANVIL_CHECK_CONFIG(omp >= 1 && omp <= max_threads(), "OMP_NUM_THREADS", "OpenMP's default of ",
                     omp, " threads (OMP_NUM_THREADS='", env_or_empty("OMP_NUM_THREADS"),
                     "') exceeds anvil's limit of ", max_threads(), " (", thread_limit_reason(),
                     "); set --threads or ANVIL_NUM_THREADS");
  return omp;
}
// 0 until decided: the default is computed on first use (and may throw), set_num_threads()
// overrides it without computing it.
std::atomic<int> g_threads{0};
}  // namespace

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool verbose_enabled(const std::string& topic) {
  static const std::vector<std::string> topics = [] {
    std::vector<std::string> out;
    const std::string v = env_or_empty("ANVIL_VERBOSE");
    std::size_t pos = 0;
    while (pos <= v.size()) {
      std::size_t end = v.find(',', pos);
      if (end == std::string::npos) end = v.size();
      if (end > pos) out.push_back(v.substr(pos, end - pos));
      pos = end + 1;
    }
    return out;
  }();
  for (const auto& t : topics)
    if (t == topic) return true;
  return false;
}

int max_threads() {
  const auto hw = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(kMinThreadLimit, kThreadsPerHardwareThread * hw);
}

std::string thread_limit_reason() {
  return std::to_string(kThreadsPerHardwareThread) + " x the " +
         std::to_string(std::thread::hardware_concurrency()) + " hardware threads, at least " +
         std::to_string(kMinThreadLimit);
}

void set_num_threads(int n) {
  ANVIL_CHECK_CONFIG(n >= 1 && n <= max_threads(), "set_num_threads",
                     "expected a thread count in [1, ", max_threads(), "] (", thread_limit_reason(),
                     "), got ", n);
  omp_set_num_threads(n);
  g_threads.store(n);
  std::lock_guard<std::mutex> lock(setters_mutex());
  for (auto& s : setters()) s(n);
}

int get_num_threads() {
  int n = g_threads.load();
  if (n != 0) return n;
  n = default_threads();
  int expected = 0;  // a concurrent set_num_threads() wins
  return g_threads.compare_exchange_strong(expected, n) ? n : expected;
}

unsigned openmp_context() {
  return static_cast<unsigned>(omp_get_max_threads()) * 2U + (omp_in_parallel() ? 1U : 0U);
}

void add_thread_setter(std::function<void(int)> setter) {
  setter(get_num_threads());
  std::lock_guard<std::mutex> lock(setters_mutex());
  setters().push_back(std::move(setter));
}

namespace {
std::mutex& versions_mutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, std::string>& versions() {
  static std::map<std::string, std::string> v{{"OpenMP", std::to_string(_OPENMP)},
                                              {"compiler", __VERSION__}};
  return v;
}
}  // namespace

void add_library_version(const std::string& library, const std::string& version) {
  std::lock_guard<std::mutex> lock(versions_mutex());
  versions()[library] = version;
}

std::map<std::string, std::string> library_versions() {
  std::lock_guard<std::mutex> lock(versions_mutex());
  return versions();
}

std::map<std::string, std::string> config_summary() {
  std::map<std::string, std::string> m;
  m["threads"] = std::to_string(get_num_threads());
  m["omp_max_threads"] = std::to_string(omp_get_max_threads());
  for (const char* name :
       {"ANVIL_NUM_THREADS", "ANVIL_VARIANT", "ANVIL_AUTOTUNE", "ANVIL_AUTOTUNE_SEED",
        "OMP_WAIT_POLICY", "OMP_PROC_BIND", "ANVIL_CUDA_LIBRARY", "ANVIL_CPU_HUGE_PAGES",
        "ANVIL_CPU_CACHE_BOUND", "ANVIL_VERBOSE"}) {
    const std::string v = env_or_empty(name);
    if (!v.empty()) m[std::string("env.") + name] = v;
  }
  for (const auto& [lib, version] : library_versions()) m["version." + lib] = version;
  return m;
}

}  // namespace anvil
