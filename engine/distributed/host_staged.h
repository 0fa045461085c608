// SPDX-License-Identifier: Apache-2.0
#pragma once
// Device collectives staged through the host: a Communicator over a host backend (mpi) that takes
// CUDA tensors by copying them to the host, running the host collective and copying the result
// back (issue 36, point 8). It lets several processes share one GPU in the same data-parallel
// path as nccl, which needs a GPU per rank (Note [One GPU per rank]).
//
// Note [Host-staged device collectives]
// * What it is for: correctness of multi-rank GPU training on a machine with fewer GPUs than
//   ranks (the lent machines have one). n ranks on one GPU must equal one process on the global
//   batch, as on the CPU (Note [Data-parallel tolerance]). It is not a fast path: every bucket
//   crosses PCIe twice and the host collective runs between, so the overlap with backward is
//   limited to the host collective's own progress.
// * Ordering: the device-to-host copy is the Tensor copy, which waits for the compute stream's
//   writes to the tensor; the result is copied back when the Work is waited on (on the compute
//   stream, so later kernels read it). Until then the device tensor keeps its old values, so a
//   caller must wait before reading it, as with every Work.
// * Placement: each rank takes GPU node-local rank modulo the GPUs it sees, as nccl does, but two
//   ranks may share a GPU (that is the point).
// * The host tensors of a collective in flight live in its Work, so they outlive the call.
// * Host tensors pass straight through to the host backend (metrics, the handshake).
// * A test seam: stage_host_tensors stages host tensors too (a copy to another host buffer and
//   back), so the staging and the copy-back are exercised on machines without a GPU.
#include "engine/distributed/communicator.h"

namespace anvil::dist {

struct HostStagedOptions {
  // The GPU of this rank; -1: choose node-local rank modulo the visible GPUs (needs CUDA).
  int device = -1;
  // Tests: stage host tensors as well (Note [Host-staged device collectives]); with device -1
  // no GPU is placed.
  bool stage_host_tensors = false;
};

// `host` (an mpi or single communicator) taking CUDA tensors through host copies. Throws naming
// the reason when options.device is -1 and there is no CUDA GPU.
CommunicatorPtr host_staged(CommunicatorPtr host, HostStagedOptions options = {});

}  // namespace anvil::dist
