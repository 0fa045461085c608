// SPDX-License-Identifier: Apache-2.0
#pragma once
// Bookkeeping of the moments the host waits for a GPU, and the device error record that lets
// kernels report bad inputs without a wait of their own. C++17-clean (usable from .cu files).
//
// Note [Host waits in a step]
// A GPU training step should wait for the device once, at its end (issue 21). Every place in
// libanvil_cuda that blocks the host on the device calls note_host_wait(), and every
// device -> host copy also note_readback(); CudaBackend::sync_counts() returns the totals, so a
// test can count the waits of one step. Checks that need a kernel's verdict (a cross-entropy
// class id out of range) do not wait: the kernel writes a DeviceErrorRecord that lives in
// mapped page-locked host memory, and the host reads it after the next wait on that device
// (raise_device_error), where it becomes the anvil::Error the check used to throw at once.
#include <cstdint>

namespace anvil::cuda {

void note_host_wait();
void note_readback();
std::uint64_t host_waits();
std::uint64_t readbacks();

// code 0: no error. The first kernel that finds an error fills a, b, c and then sets code; later
// ones leave the record alone until the host has reported it.
enum DeviceErrorCode : std::uint64_t {
  kDeviceErrorNone = 0,
  kDeviceErrorCrossEntropyTarget = 1,  // a = row, b = class id, c = classes
  kDeviceErrorEmbeddingIndex = 2,      // a = position, b = id, c = rows of the table
};
struct DeviceErrorRecord {
  std::uint64_t code;
  std::int64_t a, b, c;
};

// The record of `device`, as a pointer kernels of that device may write (mapped pinned memory,
// allocated on first use and kept for the life of the process).
DeviceErrorRecord* device_error_record(int device);
// After the host has waited for `device`'s work: throws the anvil::Error of a recorded error
// (and clears the record), or returns.
void raise_device_error(int device);

}  // namespace anvil::cuda
