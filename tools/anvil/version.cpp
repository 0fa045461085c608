// SPDX-License-Identifier: Apache-2.0
// The only file of the tool that includes the generated revision header (CMakeLists.txt: a new
// commit recompiles this file alone).
#include "tools/anvil/version.h"

#include <fmt/format.h>

#include "anvil/anvil.h"
#include "anvil_git_rev.h"

namespace anvil::tools {

std::string anvil_version() { return ANVIL_VERSION; }

std::string anvil_git_revision() { return ANVIL_GIT_REV; }

std::string version_text() {
  register_builtin_kernels();  // records the library versions
  const std::string cuda = cuda_available() ? "available" : cuda_unavailable_reason();  // loads it
  std::string text = fmt::format("anvil {} (git {})\n", anvil_version(), anvil_git_revision());
  for (const auto& [k, v] : config_summary())
    if (k.rfind("version.", 0) == 0) text += fmt::format("  {:<16} {}\n", k.substr(8), v);
  text += "  cuda             " + cuda;  // CLI11 ends the text with a newline
  return text;
}

}  // namespace anvil::tools
