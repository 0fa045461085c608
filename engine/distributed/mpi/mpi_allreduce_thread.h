// SPDX-License-Identifier: Apache-2.0
#pragma once
// The all-reduce algorithms of the "mpi" communicator besides Open MPI's non-blocking
// MPI_Iallreduce (Note [All-reduce algorithms]), run on a communication thread. Internal to
// libanvil_mpi.so; no MPI type appears here (public headers expose no third-party header).
//
// Note [All-reduce algorithms]
// ANVIL_ALLREDUCE picks how the mpi communicator all-reduces (read once, when MPI starts;
// create_communicator("mpi") checks it and ANVIL_ALLREDUCE_CHUNK_KIB before loading MPI, so a
// bad value is a configuration error, exit status 2 in the CLI):
//  - libnbc (default): MPI_Iallreduce in place, progressed by the training thread's MPI calls.
//    Open MPI 4.1 hands it to coll/libnbc, which runs a binomial tree for every in-place call:
//    at n ranks about log2(n) serial full-size sends and sums.
//  - chunked: the tensor goes out in chunks of ANVIL_ALLREDUCE_CHUNK_KIB (default 8192 = 8 MiB),
//    out of place, each through a blocking MPI_Allreduce on a communication thread (Horovod's
//    design). Blocking calls go to coll/tuned, which picks by size (recursive doubling, ring or
//    Rabenseifner's reduce-scatter + all-gather for large messages), and the temporary buffer is
//    one chunk that is reused instead of a fresh full-size allocation per call.
//  - ring: our own ring on the same thread, per chunk: n - 1 steps of reduce-scatter
//    (MPI_Sendrecv of one segment to the right neighbour, MPI_Reduce_local into ours) and n - 1
//    steps of all-gather. Each rank sends and receives 2 (n - 1) / n of the data, the ring's
//    bus-bandwidth factor.
//  - auto: libnbc below 1 MiB (its latency is lowest, no thread hand-off), chunked above.
// The thread runs jobs in the order they were submitted on a communicator of its own, so its
// collectives never interleave with the training thread's (MPI orders collectives per
// communicator, and every rank submits the same jobs in the same order). The training thread
// waits on a job's done flag with the collective timeout (Note [Collective timeout]): a stalled
// peer leaves the thread blocked inside MPI, the wait throws anyway, and the communicator,
// now broken, abandons the thread instead of joining it at exit (its state is shared, so the
// blocked thread never touches freed memory).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/distributed/communicator.h"

namespace anvil::dist {

// One submitted all-reduce; `done` turns true (release) when the result is in place or failed.
// The waiter sleeps on `finished` instead of spinning: on a machine with as many ranks as cores,
// a spinning waiter takes the core the communication threads need.
struct AllReduceJob {
  void* data = nullptr;
  std::int64_t count = 0;
  DType dtype = DType::f32;
  bool max = false;   // else sum
  bool ring = false;  // else chunked MPI_Allreduce
  std::atomic<bool> done{false};
  int error = 0;  // MPI_SUCCESS or the MPI error code, valid once done
  const char* failed_call = "";
  std::mutex mutex;
  std::condition_variable finished;
  // True when done before `deadline`.
  bool wait_until(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex);
    return finished.wait_until(lock, deadline, [this] { return done.load(); });
  }
};
using AllReduceJobPtr = std::shared_ptr<AllReduceJob>;

class AllReduceThread {
 public:
  // Runs on a duplicate of MPI_COMM_WORLD (MPI started with MPI_THREAD_MULTIPLE); throws
  // anvil::Error when it cannot be made.
  explicit AllReduceThread(std::int64_t chunk_bytes);
  ~AllReduceThread();  // drains and joins the thread, frees the communicator; see abandon()
  AllReduceThread(const AllReduceThread&) = delete;
  AllReduceThread& operator=(const AllReduceThread&) = delete;
  void submit(const AllReduceJobPtr& job);
  // After a timeout the thread may be blocked in MPI for good: the destructor then detaches it.
  void abandon();
  std::int64_t chunk_bytes() const;

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the thread
  std::thread thread_;
  bool abandoned_ = false;
};

}  // namespace anvil::dist
