// SPDX-License-Identifier: Apache-2.0
// Threads and knobs (engine/core/config.h).
#include "engine/core/config.h"

#include <omp.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "engine/core/error.h"

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
int& current_threads() {
  static int n = [] {
    const std::string env = env_or_empty("ANVIL_NUM_THREADS");
    if (!env.empty()) {
      char* end = nullptr;
      const long v = std::strtol(env.c_str(), &end, 10);
      ANVIL_CHECK(end && *end == '\0' && v > 0 && v < 4096, "ANVIL_NUM_THREADS",
                  "expected a positive integer, got '", env, "'");
      omp_set_num_threads(static_cast<int>(v));
      return static_cast<int>(v);
    }
    return omp_get_max_threads();
  }();
  return n;
}
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

void set_num_threads(int n) {
  ANVIL_CHECK(n > 0, "set_num_threads", "thread count must be positive, got ", n);
  omp_set_num_threads(n);
  current_threads() = n;
  std::lock_guard<std::mutex> lock(setters_mutex());
  for (auto& s : setters()) s(n);
}

int get_num_threads() { return current_threads(); }

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
       {"ANVIL_NUM_THREADS", "ANVIL_VARIANT", "ANVIL_AUTOTUNE", "OMP_WAIT_POLICY", "OMP_PROC_BIND",
        "ANVIL_CUDA_LIBRARY", "ANVIL_CPU_HUGE_PAGES", "ANVIL_CPU_CACHE_BOUND", "ANVIL_VERBOSE"}) {
    const std::string v = env_or_empty(name);
    if (!v.empty()) m[std::string("env.") + name] = v;
  }
  for (const auto& [lib, version] : library_versions()) m["version." + lib] = version;
  return m;
}

}  // namespace anvil
