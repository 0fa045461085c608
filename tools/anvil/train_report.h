// SPDX-License-Identifier: Apache-2.0
#pragma once
// The JSON log of `anvil train` (--json-log): the configuration, every epoch's figures and the
// result, rewritten after each epoch. print_summary (trainer.h) is defined beside it.
#include "tools/anvil/trainer.h"

namespace anvil::tools {

// Rewrites the JSON log atomically (temporary file + rename): a reader never sees half a log.
// Nothing without --json-log.
void write_json_log(const TrainConfig& c, const TrainReport& r);

}  // namespace anvil::tools
