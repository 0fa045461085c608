// SPDX-License-Identifier: Apache-2.0
// The output probes of `anvil train` (Note [Outputs checked up front] in output_paths.h).
#include "tools/anvil/output_paths.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "engine/core/error.h"

namespace anvil::tools {
namespace {

namespace fs = std::filesystem;
constexpr const char* kWhere = "anvil train";

// One path for comparisons: absolute and normalised, through the symbolic links that exist.
fs::path canonical_form(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  return ec ? fs::absolute(path).lexically_normal() : p;
}

void probe(const std::string& option, const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  ANVIL_CHECK(!fs::is_directory(st), kWhere, option, " ", path, " is a folder, not a file");
  ANVIL_CHECK(!fs::exists(st) || fs::is_regular_file(st), kWhere, option, " ", path,
              " exists and is not a regular file");
  const fs::path folder = p.has_parent_path() ? p.parent_path() : fs::path(".");
  ANVIL_CHECK(fs::is_directory(folder, ec), kWhere, option, " ", path, ": the folder ",
              folder.string(), " does not exist");
  // The writer's own temporary file: creating it is what writing needs (permission, space for
  // an inode, a read-only file system).
  const std::string tmp = temporary_path(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ANVIL_CHECK(fd >= 0, kWhere, option, " ", path, ": cannot create a file in ", folder.string(),
              ": ", std::strerror(errno));
  ::close(fd);
  ::unlink(tmp.c_str());
}

}  // namespace

std::string temporary_path(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

void check_output_paths(const TrainConfig& c) {
  std::vector<std::pair<std::string, std::string>> outputs;  // option, path
  if (!c.checkpoint.empty()) outputs.emplace_back("--checkpoint", c.checkpoint);
  if (!c.json_log.empty()) outputs.emplace_back("--json-log", c.json_log);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& [option, path] = outputs[i];
    for (std::size_t j = 0; j < i; ++j)
      ANVIL_CHECK(canonical_form(path) != canonical_form(outputs[j].second), kWhere, option, " ",
                  path, " is the same file as ", outputs[j].first, " ", outputs[j].second);
    ANVIL_CHECK(c.resume.empty() || option == "--checkpoint" ||
                    canonical_form(path) != canonical_form(c.resume),
                kWhere, option, " ", path, " would overwrite the checkpoint --resume reads");
    probe(option, path);
  }
}

}  // namespace anvil::tools
