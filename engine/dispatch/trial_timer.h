// SPDX-License-Identifier: Apache-2.0
#pragma once
// The autotune trial timer: one for every table (Note [Trial timer]).
//
// Note [Trial timer]
// Autotune (Note [Variant selection], step 2) runs each supporting variant on scratch outputs
// and keeps the fastest. A CPU variant has finished when it returns, so the host clock times it.
// A CUDA variant only enqueues work and returns, so the host clock would rank launch costs, not
// kernels: CUDA trials are timed with events recorded on the device's stream around the
// enqueue (CudaBackend::time_on_stream), which waits for the trial's work. Every op's trial
// goes through time_trial(), so the two devices cannot be timed two ways.
#include <functional>

#include "engine/core/device.h"

namespace anvil {

// Seconds one call of `run` takes on `device` (host clock on the CPU, stream events on a GPU).
// `where` names the op in the error when the CUDA backend is missing.
double time_trial(const Device& device, const std::function<void()>& run, const char* where);

}  // namespace anvil
