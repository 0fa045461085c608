// SPDX-License-Identifier: Apache-2.0
#pragma once
// The NCCL seam of the CUDA backend (CudaBackend::create_collectives): collectives over device
// memory on a stream of their own, in plain types so that neither the engine nor its users see
// NCCL. engine/distributed/nccl_communicator.cpp builds the "nccl" Communicator on it.
//
// Note [Collective stream ordering]
// Every operation first makes the collective stream wait for an event recorded on the device's
// compute stream (so it reads gradients the compute stream has finished writing), then runs on
// the collective stream and records a completion event. wait(ticket) polls that event from the
// host until it completes (watching for a timeout or an asynchronous NCCL error meanwhile), then
// makes the compute stream wait for it too, so later kernels read the result.
#include <cstdint>
#include <string>

#include "engine/core/dtype.h"

namespace anvil {

class DeviceCollectives {
 public:
  enum class Op { sum, average, max };
  virtual ~DeviceCollectives() = default;
  // Enqueue, return a ticket for query()/wait(). count is in elements of dtype.
  virtual std::uint64_t all_reduce(void* data, std::int64_t count, DType dtype, Op op) = 0;
  virtual std::uint64_t broadcast(void* data, std::int64_t count, DType dtype, int root) = 0;
  virtual std::uint64_t all_gather(const void* in, void* out, std::int64_t count, DType dtype) = 0;
  virtual bool query(std::uint64_t ticket) = 0;
  // Orders the compute stream after the ticket; throws anvil::Error after timeout_seconds without
  // completion or on an asynchronous NCCL error (the communicator is then unusable, but not
  // aborted: Note [NCCL failure without ncclCommAbort] in kernels/cuda/nccl_collectives.cpp).
  virtual void wait(std::uint64_t ticket, double timeout_seconds) = 0;
  virtual std::string version() const = 0;  // "NCCL 2.28.3"
  // Aborts the communicator (ncclCommAbort): operations in flight stop, later ones throw. For
  // a program ending a failed job (Note [Failing fast across ranks]); idempotent.
  virtual void abort() = 0;
};

}  // namespace anvil
