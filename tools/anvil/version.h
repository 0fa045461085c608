// SPDX-License-Identifier: Apache-2.0
#pragma once
// `anvil --version`: the release, the git revision the binary was built from (with "+dirty"
// when tracked files differed from it) and the libraries it runs with.
#include <string>

namespace anvil::tools {

// "1.2.3"
std::string anvil_version();
// "a1b2c3d", "a1b2c3d+dirty" or "unknown" (a build outside a git checkout).
std::string anvil_git_revision();
// The lines `anvil --version` prints.
std::string version_text();

}  // namespace anvil::tools
