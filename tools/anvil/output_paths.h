// SPDX-License-Identifier: Apache-2.0
#pragma once
// The files `anvil train` writes: checked before the first epoch, and written through temporary
// files that are unique per process.
//
// Note [Outputs checked up front]
// A checkpoint or JSON log path in a missing folder used to fail only when the first epoch
// ended, losing that epoch's work. check_output_paths probes every output before any data is
// read: the path must not be a folder or another non-regular file, and its folder must accept
// the very temporary file the writer will create (it is created and removed again). Two outputs
// may not be one file (a --json-log equal to --checkpoint overwrote the checkpoint with the log),
// and no output may be the --resume file except --checkpoint, which continues a run in place.
#include <string>

#include "tools/anvil/trainer.h"

namespace anvil::tools {

// Throws anvil::Error naming the option, the path and the problem.
void check_output_paths(const TrainConfig& c);

// "<path>.tmp.<pid>": the temporary file an atomic rewrite of `path` goes through, in the same
// folder (so the rename stays on one file system) and unique per process, so that concurrent
// runs writing the same log do not truncate or rename each other's half-written files (with a
// fixed name they did); the last complete rename wins. save_safetensors names its own the same
// way (Note [Atomic save]).
std::string temporary_path(const std::string& path);

}  // namespace anvil::tools
