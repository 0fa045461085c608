// SPDX-License-Identifier: Apache-2.0
#pragma once
// Per-device execution context shared by everything in libanvil_cuda: the one stream on which
// all anvil work for a device runs (copies, cuBLAS, cuDNN and the custom kernels). One stream
// per device is what makes the block cache's reuse safe (Note [CUDA block cache]).
// C++17-clean (usable from .cu files).
#include <cuda_runtime_api.h>

namespace anvil::cuda {

// The device's stream, created on first use (non-blocking: it does not serialise with the
// legacy default stream that other libraries in the process may use). Throws anvil::Error for
// an invalid device or when CUDA fails.
cudaStream_t stream(int device);

// Launches an empty kernel on `stream` and returns the launch status; used once per device to
// find out early whether this build's SASS/PTX runs on it (cudaErrorNoKernelImageForDevice
// otherwise). Defined in probe.cu.
cudaError_t launch_probe_kernel(cudaStream_t stream);

}  // namespace anvil::cuda
