// SPDX-License-Identifier: Apache-2.0
#pragma once
// The environment variables anvil reads, checked before any work (docs/training.md,
// "Limits"). The library reads each variable where it is used, often only when a run reaches
// that code (ANVIL_DIST_TIMEOUT at the first collective, ANVIL_VARIANT at the first op); a value
// out of range then fails late or, worse, is ignored or clamped without a word. `anvil` checks
// them all up front instead and refuses a bad one with anvil::ConfigError (exit status 2),
// naming the variable and its value.
namespace anvil::tools {

// threads_chosen: --threads was given, so OpenMP's inherited default (ANVIL_NUM_THREADS,
// OMP_NUM_THREADS) is not used and not checked. Registers the built-in kernels.
void check_environment(bool threads_chosen);

}  // namespace anvil::tools
