// SPDX-License-Identifier: Apache-2.0
#pragma once
// The communicator layer of data-parallel training: one interface (rank, size, all-reduce,
// broadcast, all-gather, barrier; asynchronous forms return a Work handle to wait on) and three
// backends chosen by name: "single" (one process, no MPI), "mpi" (Open MPI's non-blocking
// collectives, in the lazily loaded libanvil_mpi.so) and "nccl" (NCCL inside libanvil_cuda.so,
// bootstrapped over MPI). No MPI or NCCL type appears here (Note [Communicator layering]).
//
// Note [Communicator layering]
// engine/distributed/ sits above engine/optim, and no lower engine layer includes it (the
// layering lint, tests/lint/check_layering.py): communicator.h needs only engine/core (Tensor);
// data_parallel.h adds autograd's hooks, nn's Module and the optimizer it steps. The MPI backend is
// a module of its own that the engine dlopen()s on first use, as it does libanvil_cuda.so (Note
// [Lazy CUDA loading]), so a process that never asks for "mpi" neither links nor loads Open MPI; a
// build without MPI simply has no module and create_communicator("mpi") says so. NCCL lives in
// libanvil_cuda.so behind the DeviceCollectives seam (engine/core/device_collectives.h), which
// kernels/cuda/ may implement without seeing this header.
#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/tensor.h"

namespace anvil::dist {

enum class ReduceOp { sum, average, max };
const char* reduce_op_name(ReduceOp op);

// An operation in flight. wait() returns when the result is in place, or throws anvil::Error
// when it failed or did not complete within the communicator's timeout
// (Note [Collective timeout]). Waiting twice is allowed.
class Work {
 public:
  virtual ~Work() = default;
  virtual bool test() = 0;  // true when complete (never blocks)
  virtual void wait() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

// Note [Collective timeout]
// A collective whose peer died or stalls never completes. Open MPI's mpirun kills the whole job
// when a rank is killed; when a peer is alive but stuck (or the launcher does not notice),
// wait() polls the operation and throws after `timeout_seconds` without completion, naming the
// operation, the rank and the timeout, so the process exits with a clear error instead of
// hanging. The communicator is then broken: every later call throws at once. The timeout comes
// from ANVIL_DIST_TIMEOUT (seconds, default 60: long enough for the imbalance between ranks of a
// slow CPU step or rank 0's checkpoint write, short enough that a stalled job ends within a
// minute; raise it for steps that take minutes).
//
// Note [Failing fast across ranks]
// An error on one rank must end the whole job, not only that rank: a rank that returned from
// main blocked in MPI_Finalize while its peers waited in their next collective for the whole
// timeout. abort(code) ends every process of the job at once: mpi calls MPI_Abort (the launcher
// kills every rank; it does not return); nccl on several ranks calls its MPI bootstrap's abort
// (not ncclCommAbort, which can hang when the peers do not abort with it; nccl_communicator.cpp),
// and on one process aborts the NCCL communicator and returns; single returns (there is no other
// process; the caller exits as usual). The library never calls it
// itself (nothing in the library exits): the program decides, after printing its error
// (tools/anvil/main.cpp).
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "single", "mpi", "nccl"
  virtual std::string version() const = 0;  // "Open MPI v4.1.4", "NCCL 2.28.3", ...
  // The GPU this rank's device collectives run on (nccl: one per rank, Note [One GPU per rank]);
  // -1 for the host backends. Models and gradients of this rank belong there.
  virtual int cuda_device() const { return -1; }
  // The all-reduce algorithm this backend runs for a tensor of `bytes`, for logs and results
  // (mpi: Note [All-reduce algorithms] in engine/distributed/mpi/mpi_allreduce_thread.h).
  virtual std::string all_reduce_algorithm(std::int64_t bytes) const {
    (void)bytes;
    return backend();
  }
  // In place on a contiguous tensor of f32, f64 or i64 (average: floating types only), of any
  // size including 0. The tensor must stay alive and untouched until the Work completes.
  // bf16 (the wire format of bf16 gradient buckets) is taken for sum only: each pair of values
  // is added in f32 and rounded once to bf16 (Note [bf16 gradient buckets] in data_parallel.h).
  virtual WorkPtr all_reduce_async(Tensor& t, ReduceOp op) = 0;
  virtual WorkPtr broadcast_async(Tensor& t, int root) = 0;
  // out (contiguous, size() * in.numel() elements of in's dtype) = every rank's `in`, rank by rank.
  virtual WorkPtr all_gather_async(const Tensor& in, Tensor& out) = 0;
  // out (in.numel() / size() elements of in's dtype) = block rank() of the reduction of every
  // rank's `in` (whose size must divide by size()); `in` must stay untouched until the Work
  // completes. This default all-reduces a copy and takes this rank's block (blocking; the
  // backends without a collective of their own: single, nccl); mpi has MPI_Ireduce_scatter_block.
  virtual WorkPtr reduce_scatter_async(const Tensor& in, Tensor& out, ReduceOp op);
  virtual void barrier() = 0;
  // Lets operations in flight advance. MPI progresses non-blocking collectives only inside MPI
  // calls, so data parallelism calls this between backward nodes (Note [Gradient buckets]).
  virtual void progress() {}
  // Ends every process of the job with exit status `code` (Note [Failing fast across ranks]).
  // Does not return for mpi and multi-rank nccl; returns for single.
  virtual void abort(int code) { (void)code; }

  // Blocking forms.
  void all_reduce(Tensor& t, ReduceOp op = ReduceOp::sum) { all_reduce_async(t, op)->wait(); }
  void broadcast(Tensor& t, int root = 0) { broadcast_async(t, root)->wait(); }
  Tensor all_gather(const Tensor& in);  // a new [size * in.numel()] tensor
  // One double reduced over the ranks (metrics, timings).
  double all_reduce_scalar(double value, ReduceOp op = ReduceOp::sum);

  // "mpi rank 1/2" etc., for logs and results' context.
  std::string describe() const;
};
using CommunicatorPtr = std::shared_ptr<Communicator>;

// Seconds a wait may last (ANVIL_DIST_TIMEOUT, default 60; Note [Collective timeout]).
double collective_timeout_seconds();

// True when this process was started by mpirun with more than one rank (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE, PMIX_RANK...), without loading MPI.
int launcher_world_size();

// The backend named `name`: "single", "mpi", "nccl" or "auto" (mpi when launcher_world_size() > 1,
// else single). "mpi" loads libanvil_mpi.so and initialises MPI once per process (the same
// world communicator is returned on every call); "nccl" first checks for a GPU and throws
// "... nccl backend needs a CUDA GPU: <reason>" before touching MPI. Throws anvil::Error naming
// the backend and the reason when it cannot be created. "nccl" bootstraps over "mpi" under a
// multi-rank launch and over nothing for one process (Note [NCCL without MPI on one process]).
CommunicatorPtr create_communicator(const std::string& name);

// The mpi communicator's all-reduce algorithms (Note [All-reduce algorithms] in
// engine/distributed/mpi/mpi_allreduce_thread.h): ANVIL_ALLREDUCE and ANVIL_ALLREDUCE_CHUNK_KIB
// (default 8192), each throwing anvil::ConfigError on a bad value; resolve_all_reduce gives the
// algorithm that runs for a tensor of `bytes` (auto resolved).
enum class AllReduceAlgorithm { libnbc, chunked, ring, automatic };
const char* all_reduce_algorithm_name(AllReduceAlgorithm a);
AllReduceAlgorithm all_reduce_algorithm_from_env();
std::int64_t all_reduce_chunk_bytes_from_env();
AllReduceAlgorithm resolve_all_reduce(AllReduceAlgorithm a, std::int64_t bytes);

// Checks the arguments every backend checks the same way (contiguity, dtype, sizes).
void check_collective(const char* op, const Tensor& t, ReduceOp reduce, bool reducing);
// The same for an all-reduce, which also takes bf16 with sum (and nothing else for bf16).
void check_all_reduce(const char* op, const Tensor& t, ReduceOp reduce);
// The same for a reduce-scatter of `in` over `ranks` into `out`.
void check_reduce_scatter(const char* op, const Tensor& in, const Tensor& out, ReduceOp reduce,
                          int ranks);

}  // namespace anvil::dist
