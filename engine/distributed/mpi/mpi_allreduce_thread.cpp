// SPDX-License-Identifier: Apache-2.0
// The communication thread of the chunked and ring all-reduces (Note [All-reduce algorithms]).
#include "engine/distributed/mpi/mpi_allreduce_thread.h"

#include <mpi.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/core/error.h"

namespace anvil::dist {

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::i64:
      return MPI_INT64_T;
    case DType::i32:
      return MPI_INT32_T;
    case DType::bf16:
      return MPI_UINT16_T;  // opaque 16 bits, reduced by the bf16 sum op (Note [bf16 summing
                            // MPI_Op])
    case DType::f16:
      break;  // check_collective refused it before (no MPI type for 16-bit floats)
  }
  fail("mpi", "no MPI datatype for ", dtype_name(d));
}

MPI_Op mpi_reduce_op(DType d, bool max);  // mpi_bf16_sum.cpp

namespace {
// The MPI form of a job's element type and operation.
struct MpiArgs {
  explicit MpiArgs(const AllReduceJob& job)
      : type(mpi_type(job.dtype)),
        op(mpi_reduce_op(job.dtype, job.max)),
        element_bytes(static_cast<std::int64_t>(dtype_size(job.dtype))) {}
  MPI_Datatype type;
  MPI_Op op;
  std::int64_t element_bytes;
};
}  // namespace

struct AllReduceThread::State {
  MPI_Comm comm = MPI_COMM_NULL;
  std::int64_t chunk_bytes = 0;
  int rank = 0, size = 1;
  std::vector<char> scratch;  // one chunk: the out-of-place result, or a received ring segment
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<AllReduceJobPtr> queue;
  bool stop = false;

  void loop() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      wake.wait(lock, [this] { return stop || !queue.empty(); });
      if (queue.empty()) return;  // stop requested and nothing left
      AllReduceJobPtr job = queue.front();
      queue.pop_front();
      lock.unlock();
      run(*job);
      {
        std::lock_guard<std::mutex> job_lock(job->mutex);
        job->done.store(true, std::memory_order_release);
      }
      job->finished.notify_all();
      lock.lock();
    }
  }

  void run(AllReduceJob& job) {
    const MpiArgs mpi(job);
    const std::int64_t per_chunk = std::max<std::int64_t>(1, chunk_bytes / mpi.element_bytes);
    char* base = static_cast<char*>(job.data);
    for (std::int64_t first = 0; first < job.count; first += per_chunk) {
      const std::int64_t n = std::min(per_chunk, job.count - first);
      char* chunk = base + first * mpi.element_bytes;
      const int rc = job.ring ? ring(job, mpi, chunk, n) : blocking(job, mpi, chunk, n);
      if (rc != MPI_SUCCESS) {
        job.error = rc;
        return;
      }
    }
  }

  int blocking(AllReduceJob& job, const MpiArgs& mpi, char* chunk, std::int64_t n) {
    const int rc =
        MPI_Allreduce(chunk, scratch.data(), static_cast<int>(n), mpi.type, mpi.op, comm);
    if (rc != MPI_SUCCESS) {
      job.failed_call = "MPI_Allreduce";
      return rc;
    }
    std::memcpy(chunk, scratch.data(), static_cast<std::size_t>(n * mpi.element_bytes));
    return MPI_SUCCESS;
  }

  // Segment k of a chunk of n elements: [k n / size, (k + 1) n / size).
  std::int64_t segment_begin(std::int64_t n, int k) const { return n * k / size; }

  int ring(AllReduceJob& job, const MpiArgs& mpi, char* chunk, std::int64_t n) {
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    const auto seg = [&](int k) { return ((k % size) + size) % size; };
    const auto ptr = [&](int k) { return chunk + segment_begin(n, k) * mpi.element_bytes; };
    const auto len = [&](int k) {
      return static_cast<int>(segment_begin(n, k + 1) - segment_begin(n, k));
    };
    // Reduce-scatter: after step s this rank holds the sum of s + 2 ranks in segment rank - s - 1;
    // after size - 1 steps, the whole sum of segment rank + 1.
    for (int s = 0; s + 1 < size; ++s) {
      const int out = seg(rank - s), in = seg(rank - s - 1);
      int rc = MPI_Sendrecv(ptr(out), len(out), mpi.type, right, 0, scratch.data(), len(in),
                            mpi.type, left, 0, comm, MPI_STATUS_IGNORE);
      if (rc == MPI_SUCCESS)
        rc = MPI_Reduce_local(scratch.data(), ptr(in), len(in), mpi.type, mpi.op);
      if (rc != MPI_SUCCESS) {
        job.failed_call = "ring reduce-scatter (MPI_Sendrecv, MPI_Reduce_local)";
        return rc;
      }
    }
    // All-gather: pass the finished segments around, received in place.
    for (int s = 0; s + 1 < size; ++s) {
      const int out = seg(rank + 1 - s), in = seg(rank - s);
      const int rc = MPI_Sendrecv(ptr(out), len(out), mpi.type, right, 1, ptr(in), len(in),
                                  mpi.type, left, 1, comm, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) {
        job.failed_call = "ring all-gather (MPI_Sendrecv)";
        return rc;
      }
    }
    return MPI_SUCCESS;
  }
};

AllReduceThread::AllReduceThread(std::int64_t chunk_bytes) : state_(std::make_shared<State>()) {
  const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &state_->comm);
  ANVIL_CHECK(rc == MPI_SUCCESS, "mpi", "MPI_Comm_dup for the all-reduce thread failed (error ", rc,
              ")");
  state_->chunk_bytes = chunk_bytes;
  state_->scratch.resize(static_cast<std::size_t>(chunk_bytes));
  MPI_Comm_rank(state_->comm, &state_->rank);
  MPI_Comm_size(state_->comm, &state_->size);
  std::shared_ptr<State> state = state_;  // the thread keeps the state alive (abandon())
  thread_ = std::thread([state] { state->loop(); });
}

AllReduceThread::~AllReduceThread() {
  if (abandoned_) {
    thread_.detach();  // possibly blocked in MPI for good; the process is about to end
    return;
  }
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stop = true;
  }
  state_->wake.notify_one();
  thread_.join();
  MPI_Comm_free(&state_->comm);
}

void AllReduceThread::submit(const AllReduceJobPtr& job) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->queue.push_back(job);
  }
  state_->wake.notify_one();
}

void AllReduceThread::abandon() { abandoned_ = true; }

std::int64_t AllReduceThread::chunk_bytes() const { return state_->chunk_bytes; }

}  // namespace anvil::dist
