// SPDX-License-Identifier: Apache-2.0
#pragma once
// The kernel that reports an out-of-range id to the device's error record (host_waits.h, Note
// [Host waits in a step]), shared by the kernels that read class or embedding ids (the
// cross-entropy forward, the embedding gather). CUDA only (.cu files).
#include <cstdint>

#include "kernels/cuda/host_waits.h"

namespace anvil::cuda {

// One thread, after a kernel that left the first bad position of this call in *bad_pos (~0
// when none): the position, its id and `bound` go to `record` under `code`, unless an earlier
// error is still unreported.
template <typename I>
__global__ void report_bad_id(const unsigned long long* bad_pos, const I* ids, std::int64_t bound,
                              DeviceErrorCode code, DeviceErrorRecord* record) {
  const unsigned long long pos = *bad_pos;
  if (pos == ~0ull || record->code != kDeviceErrorNone) return;
  record->a = static_cast<std::int64_t>(pos);
  record->b = static_cast<std::int64_t>(ids[pos]);
  record->c = bound;
  __threadfence_system();  // the fields reach host memory before the code that announces them
  record->code = code;
}

}  // namespace anvil::cuda
