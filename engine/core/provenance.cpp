// SPDX-License-Identifier: Apache-2.0
// The only file of libanvil that includes the generated revision header (engine/CMakeLists.txt:
// a new commit recompiles this file alone).
#include "engine/core/provenance.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <ctime>

#include "anvil_git_rev.h"
#include "engine/core/config.h"
#include "engine/core/cuda_backend.h"
#include "engine/core/process_stats.h"

namespace anvil {

std::string anvil_version() { return ANVIL_VERSION; }

std::string anvil_git_revision() { return ANVIL_GIT_REV; }

namespace {

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "unknown";
  return name.data();
}

std::string gpu_text() {
  CudaBackend* cuda = cuda_backend();
  if (cuda == nullptr) return "none";  // `anvil info` says why
  const int n = cuda->device_count();
  if (n == 0) return "none (no visible CUDA device)";
  return cuda->device_name(0) + " x" + std::to_string(n);
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text.data();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> provenance() {
  std::vector<std::pair<std::string, std::string>> out = {
      {"schema", "anvil-provenance/1"},
      {"anvil_version", anvil_version()},
      {"git_revision", anvil_git_revision()},
      {"host", host_name()},
      {"cpu", cpu_model_name()},
      {"gpu", gpu_text()},
      {"timestamp_utc", utc_now()},
  };
  for (const auto& [library, version] : library_versions())
    out.emplace_back("library." + library, version);
  return out;
}

}  // namespace anvil
