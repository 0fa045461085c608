// SPDX-License-Identifier: Apache-2.0
#pragma once
// Where and from what a result was made, for every file anvil writes (Note [Provenance]).
#include <string>
#include <utility>
#include <vector>

namespace anvil {

// Note [Provenance]
// A number without its machine and revision cannot be compared or trusted later, so every JSON
// anvil writes (the training log, the benchmarks' context, the distributed benchmark, and from
// scripts/provenance.py the peers' rows, the comparison and GPU kit files) carries the same
// fields, under the same names:
//   schema         "anvil-provenance/1": bumped when a field changes meaning
//   anvil_version  the release (CMake's PROJECT_VERSION)
//   git_revision   the commit libanvil was built from, "+dirty" when tracked files differed,
//                  "unknown" outside a git checkout (cmake/WriteGitRevision.cmake)
//   host           gethostname()
//   cpu            /proc/cpuinfo's model name
//   gpu            "<name> x<count>" of the visible CUDA devices, or why there is none
//   timestamp_utc  when the fields were taken, ISO 8601 ("2026-11-28T02:30:00Z")
//   library.<name> each kernel library's version as registered (oneDNN, Eigen, cuDNN, ...)
// The Python side adds library.python and, for a peer, its framework (library.torch, ...), and
// takes git_revision from ANVIL_GIT_REVISION when set (the GPU kit's copy has no .git).
// The GPU field asks the CUDA backend, which loads libanvil_cuda.so (a device query, no context).
// Ordered as listed; the libraries last, by name: call register_builtin_kernels() first, which
// records them.
std::vector<std::pair<std::string, std::string>> provenance();

// The release and the revision alone (no device query): `anvil --version`.
std::string anvil_version();
std::string anvil_git_revision();

}  // namespace anvil
