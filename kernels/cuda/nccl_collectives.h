// SPDX-License-Identifier: Apache-2.0
#pragma once
// The NCCL implementation of anvil::DeviceCollectives (engine/core/device_collectives.h): one
// ncclComm_t per rank, its own non-blocking stream, events ordering it against the compute stream
// (Note [Collective stream ordering]). Built without NCCL (ANVIL_HAVE_NCCL=0), every call throws.
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "engine/core/device_collectives.h"

namespace anvil::cuda::nccl {

// "NCCL 2.28.9": loads libnccl.so.2 (Note [Lazy NCCL loading]) and resolves its symbols.
std::string library_version();
// ncclGetUniqueId as 128 bytes.
std::string unique_id();
// ncclCommInitRank on `device`; `compute` is the device's anvil stream.
std::unique_ptr<DeviceCollectives> create_collectives(cudaStream_t compute, int device, int rank,
                                                      int size, const std::string& unique_id);

}  // namespace anvil::cuda::nccl
