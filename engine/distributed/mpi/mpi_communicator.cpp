// SPDX-License-Identifier: Apache-2.0
// The "mpi" communicator (libanvil_mpi.so, dlopen()ed by create_communicator, Note
// [Communicator layering]): MPI_COMM_WORLD duplicated once per process, errors returned instead
// of aborting (MPI_ERRORS_RETURN), non-blocking collectives (MPI_Iallreduce, MPI_Ibcast,
// MPI_Iallgather, MPI_Ireduce_scatter_block, MPI_Ibarrier) whose Work polls MPI_Test until done or
// the timeout (Note [Collective timeout]). Average = MPI sum, then a scale by 1/size on completion.
// Optionally a progress thread drives collectives in flight (Note [MPI progress thread]), and
// all-reduces run chunked or as a ring on a communication thread (Note [All-reduce algorithms]).
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/core/error.h"
#include "engine/core/parse_number.h"
#include "engine/distributed/communicator.h"
#include "engine/distributed/mpi/mpi_allreduce_thread.h"

namespace anvil::dist {

MPI_Datatype mpi_type(DType d);  // mpi_allreduce_thread.cpp
// mpi_bf16_sum.cpp (Note [bf16 summing MPI_Op])
void create_bf16_sum_op();
void free_bf16_sum_op();
MPI_Op mpi_reduce_op(DType d, bool max);

namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<std::size_t>(len));
}

int mpi_count(const char* op, std::int64_t n) {
  ANVIL_CHECK(n <= INT_MAX, op, n, " elements exceed MPI's int count");
  return static_cast<int>(n);
}

class MpiCommunicator;

// Note [MPI progress thread]
// Open MPI advances a non-blocking collective only inside MPI calls (its progress engine is
// polled, there is no asynchronous progress for shared memory in 4.1): an MPI_Iallreduce started
// in a backward hook moves only when the training thread next enters MPI, i.e. at the next hook
// (Communicator::progress) or in the final wait. A 2-rank all-reduce needs several handshakes
// (Open MPI's libnbc runs it as a binomial reduce + broadcast: send, receive and sum, send back,
// each a rendezvous whose single-copy read happens in the receiver's progress call), so with one
// progress call per layer a bucket takes several layers to finish, and the last buckets finish
// only in the wait. With ANVIL_MPI_PROGRESS=thread (MPI_THREAD_MULTIPLE) a thread of the
// communicator polls MPI (MPI_Iprobe on a private communicator: it never matches anything, it
// only runs the progress engine) every ANVIL_MPI_PROGRESS_US microseconds (default 100) while
// collectives are in flight, and sleeps on a condition variable otherwise, so handshakes are
// answered during a long GEMM too (Horovod's background thread does the same job). The copies
// and sums the collective needs then run on that thread: with a free core they run beside
// backward; without one (the 2-core development machine, docs/distributed.md) they take the
// core from backward. Default ANVIL_MPI_PROGRESS=hooks: no thread, MPI_THREAD_FUNNELED.
bool progress_thread_requested() {
  static const bool on = [] {
    const char* v = std::getenv("ANVIL_MPI_PROGRESS");
    if (v == nullptr || std::strcmp(v, "hooks") == 0 || v[0] == '\0') return false;
    if (std::strcmp(v, "thread") == 0) return true;
    throw Error(detail::str_cat("mpi: ANVIL_MPI_PROGRESS must be hooks or thread, got '", v, "'"));
  }();
  return on;
}

std::chrono::microseconds progress_interval() {
  const char* v = std::getenv("ANVIL_MPI_PROGRESS_US");
  if (v == nullptr || v[0] == '\0') return std::chrono::microseconds(100);
  const auto us = parse_number<long>(v);
  // A knob limit like the others (docs/distributed.md): refused, not clamped in silence.
  ANVIL_CHECK_CONFIG(us.has_value() && *us >= 1 && *us <= 100000, "ANVIL_MPI_PROGRESS_US",
                     "expected microseconds in [1, 100000], got '", v, "'");
  return std::chrono::microseconds(*us);
}

class MpiWork final : public Work {
 public:
  MpiWork(MpiCommunicator& comm, MPI_Request req, std::string what, Tensor scaled, double scale);
  // A job of the communication thread (Note [All-reduce algorithms]) instead of a request.
  MpiWork(MpiCommunicator& comm, AllReduceJobPtr job, std::string what, Tensor scaled,
          double scale);
  ~MpiWork() override;
  bool test() override;
  void wait() override;

 private:
  void complete();
  [[noreturn]] void timed_out(double timeout);
  MpiCommunicator& comm_;
  MPI_Request req_ = MPI_REQUEST_NULL;
  AllReduceJobPtr job_;
  std::string what_;  // "all_reduce sum f32 x 1000" for errors
  Tensor scaled_;     // average: the tensor to scale by scale_ on completion
  double scale_ = 1.0;
  bool done_ = false;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
      int provided = 0;
      // FUNNELED: only the thread that runs training (and its backward hooks) calls MPI;
      // MULTIPLE when a progress thread polls too (Note [MPI progress thread]) or a
      // communication thread all-reduces (Note [All-reduce algorithms]).
      const bool threads = progress_thread_requested() || algorithm_ != AllReduceAlgorithm::libnbc;
      const int wanted = threads ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED;
      check(MPI_Init_thread(nullptr, nullptr, wanted, &provided), "MPI_Init_thread");
      owns_mpi_ = true;
      ANVIL_CHECK(provided >= wanted, "mpi", "ANVIL_MPI_PROGRESS=thread and ANVIL_ALLREDUCE=",
                  all_reduce_algorithm_name(algorithm_),
                  " need MPI_THREAD_MULTIPLE, this MPI provides level ", provided);
    }
    create_bf16_sum_op();
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int len = 0;
    MPI_Get_library_version(lib, &len);
    version_ = std::string(lib, static_cast<std::size_t>(len));
    version_ = version_.substr(0, version_.find(','));  // "Open MPI v4.1.4"
    while (!version_.empty() && (version_.back() == '\n' || version_.back() == ' '))
      version_.pop_back();
    if (progress_thread_requested()) {
      version_ += ", progress thread";  // in every log's context line
      check(MPI_Comm_dup(MPI_COMM_WORLD, &probe_comm_), "MPI_Comm_dup");
      interval_ = progress_interval();
      progress_thread_ = std::thread([this] { progress_loop(); });
    }
    if (algorithm_ != AllReduceAlgorithm::libnbc) {
      allreduce_thread_ = std::make_unique<AllReduceThread>(chunk_bytes_);
    }
  }
  // At process exit (a static in the module): MPI_Finalize, unless a collective timed out, in
  // which case the process leaves without it (finalizing with a dead peer can hang) and mpirun
  // reports the job as failed.
  ~MpiCommunicator() override {
    stop_progress_thread();
    if (broken_) return;        // an abandoned communication thread is detached with its member
    allreduce_thread_.reset();  // joined, its communicator freed, before MPI_Finalize
    if (!owns_mpi_) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    MPI_Comm_free(&comm_);
    if (probe_comm_ != MPI_COMM_NULL) MPI_Comm_free(&probe_comm_);
    free_bf16_sum_op();
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  std::string version() const override { return version_; }
  std::string all_reduce_algorithm(std::int64_t bytes) const override {
    const AllReduceAlgorithm a = resolve_all_reduce(algorithm_, bytes);
    if (a == AllReduceAlgorithm::libnbc) return "libnbc (MPI_Iallreduce in place)";
    return detail::str_cat(all_reduce_algorithm_name(a),
                           a == AllReduceAlgorithm::ring ? " (own ring" : " (MPI_Allreduce",
                           ", chunks of ", chunk_bytes_ >> 10, " KiB, communication thread)");
  }

  WorkPtr all_reduce_async(Tensor& t, ReduceOp op) override {
    check_all_reduce("mpi all_reduce", t, op);
    check_host("mpi all_reduce", t);
    const MPI_Op mop = mpi_reduce_op(t.dtype(), op == ReduceOp::max);
    const bool avg = op == ReduceOp::average && size_ > 1;
    const AllReduceAlgorithm a =
        resolve_all_reduce(algorithm_, t.numel() * static_cast<std::int64_t>(t.element_size()));
    if (a != AllReduceAlgorithm::libnbc) {
      auto job = std::make_shared<AllReduceJob>();
      job->data = t.data_ptr();
      job->count = t.numel();
      job->dtype = t.dtype();
      job->max = op == ReduceOp::max;
      job->ring = a == AllReduceAlgorithm::ring;
      if (t.numel() == 0 || size_ == 1)
        job->done = true;  // nothing to exchange (every rank sees the same numel)
      else
        allreduce_thread_->submit(job);
      return std::make_shared<MpiWork>(*this, std::move(job),
                                       describe_op("all_reduce", t, reduce_op_name(op)),
                                       avg ? t : Tensor(), 1.0 / size_);
    }
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), mpi_count("mpi all_reduce", t.numel()),
                         mpi_type(t.dtype()), mop, comm_, &req),
          "MPI_Iallreduce");
    return std::make_shared<MpiWork>(*this, req, describe_op("all_reduce", t, reduce_op_name(op)),
                                     avg ? t : Tensor(), 1.0 / size_);
  }
  WorkPtr broadcast_async(Tensor& t, int root) override {
    check_collective("mpi broadcast", t, ReduceOp::sum, false);
    check_host("mpi broadcast", t);
    ANVIL_CHECK(root >= 0 && root < size_, "mpi broadcast", "root ", root, " outside [0, ", size_,
                ")");
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Ibcast(t.data_ptr(), mpi_count("mpi broadcast", t.numel()), mpi_type(t.dtype()), root,
                     comm_, &req),
          "MPI_Ibcast");
    return std::make_shared<MpiWork>(*this, req, describe_op("broadcast", t, ""), Tensor(), 1.0);
  }
  WorkPtr all_gather_async(const Tensor& in, Tensor& out) override {
    check_collective("mpi all_gather", in, ReduceOp::sum, false);
    check_collective("mpi all_gather", out, ReduceOp::sum, false);
    check_host("mpi all_gather", in);
    check_host("mpi all_gather", out);
    ANVIL_CHECK(out.dtype() == in.dtype() && out.numel() == in.numel() * size_, "mpi all_gather",
                "output must hold ", in.numel() * size_, " ", dtype_name(in.dtype()),
                " elements, got ", out.numel(), " ", dtype_name(out.dtype()));
    MPI_Request req = MPI_REQUEST_NULL;
    const int n = mpi_count("mpi all_gather", in.numel());
    check(MPI_Iallgather(in.data_ptr(), n, mpi_type(in.dtype()), out.data_ptr(), n,
                         mpi_type(in.dtype()), comm_, &req),
          "MPI_Iallgather");
    return std::make_shared<MpiWork>(*this, req, describe_op("all_gather", in, ""), Tensor(), 1.0);
  }
  WorkPtr reduce_scatter_async(const Tensor& in, Tensor& out, ReduceOp op) override {
    check_reduce_scatter("mpi reduce_scatter", in, out, op, size_);
    check_host("mpi reduce_scatter", in);
    check_host("mpi reduce_scatter", out);
    MPI_Request req = MPI_REQUEST_NULL;
    // The input is only read: MPI's send buffer is const (MPI-3).
    check(MPI_Ireduce_scatter_block(
              in.data_ptr(), out.data_ptr(), mpi_count("mpi reduce_scatter", out.numel()),
              mpi_type(in.dtype()), op == ReduceOp::max ? MPI_MAX : MPI_SUM, comm_, &req),
          "MPI_Ireduce_scatter_block");
    const bool avg = op == ReduceOp::average && size_ > 1;
    return std::make_shared<MpiWork>(*this, req,
                                     describe_op("reduce_scatter", in, reduce_op_name(op)),
                                     avg ? out : Tensor(), 1.0 / size_);
  }
  void barrier() override {
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier");
    MpiWork(*this, req, "barrier", Tensor(), 1.0).wait();
  }
  void progress() override {
    // Any MPI call drives Open MPI's progress engine (libnbc schedules advance in it).
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, MPI_STATUS_IGNORE);
  }

  // Note [Failing fast across ranks]: the whole job, not only MPI_COMM_WORLD's dup (Open MPI
  // aborts the job either way). Marked broken first: should MPI_Abort return, the exit that
  // follows must not MPI_Finalize with peers that may be stuck.
  void abort(int code) override {
    broken_ = true;
    MPI_Abort(MPI_COMM_WORLD, code);
  }

  void check(int code, const char* call) {
    if (code == MPI_SUCCESS) return;
    mark_broken();
    throw Error(detail::str_cat("mpi: ", call, " failed on rank ", rank_, " of ", size_, ": ",
                                mpi_error_text(code)));
  }
  // The communication thread may be blocked in MPI for good: it is not joined at exit.
  void mark_broken() {
    broken_ = true;
    if (allreduce_thread_) allreduce_thread_->abandon();
  }
  bool broken() const { return broken_; }
  // Collectives in flight, for the progress thread (Note [MPI progress thread]).
  void started() {
    if (!progress_thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++in_flight_;
    }
    wake_.notify_one();
  }
  void finished() {
    if (!progress_thread_.joinable()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    --in_flight_;
  }

 private:
  void check_host(const char* op, const Tensor& t) const {
    ANVIL_CHECK(!broken_, op, "rank ", rank_,
                ": the communicator is broken after an earlier failure or timeout");
    ANVIL_CHECK(t.device().is_cpu(), op, "the mpi backend takes host tensors, got one on ",
                t.device(), " (use --dist nccl for GPU tensors)");
  }
  std::string describe_op(const char* op, const Tensor& t, const char* reduce) const {
    return detail::str_cat(op, reduce[0] ? " " : "", reduce, " ", dtype_name(t.dtype()), " x ",
                           t.numel());
  }

  void progress_loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      if (in_flight_ == 0) {
        wake_.wait(lock, [this] { return stop_ || in_flight_ > 0; });
        continue;
      }
      lock.unlock();
      int flag = 0;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, probe_comm_, &flag, MPI_STATUS_IGNORE);
      std::this_thread::sleep_for(interval_);
      lock.lock();
    }
  }
  void stop_progress_thread() {
    if (!progress_thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    progress_thread_.join();
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm probe_comm_ = MPI_COMM_NULL;  // the progress thread's (never carries messages)
  std::thread progress_thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  int in_flight_ = 0;
  bool stop_ = false;
  std::chrono::microseconds interval_{100};
  // Note [All-reduce algorithms]; read before MPI starts (they decide the thread level).
  AllReduceAlgorithm algorithm_ = all_reduce_algorithm_from_env();
  std::int64_t chunk_bytes_ = all_reduce_chunk_bytes_from_env();
  std::unique_ptr<AllReduceThread> allreduce_thread_;
  int rank_ = 0, size_ = 1;
  bool owns_mpi_ = false;
  bool broken_ = false;
  std::string version_;
};

// sched_yield between MPI_Test polls: ranks sharing a few cores give the core to the peer they
// wait for. On the 2-core development machine (heavily shared) this was 2-10x faster for
// 8 KiB..2 MiB all-reduces than spinning (docs/distributed.md); ANVIL_MPI_YIELD=0 spins.
bool yield_between_polls() {
  static const bool on = [] {
    const char* v = std::getenv("ANVIL_MPI_YIELD");
    return v == nullptr || v[0] != '0';
  }();
  return on;
}

MpiWork::MpiWork(MpiCommunicator& comm, MPI_Request req, std::string what, Tensor scaled,
                 double scale)
    : comm_(comm), req_(req), what_(std::move(what)), scaled_(std::move(scaled)), scale_(scale) {
  comm_.started();
}

MpiWork::MpiWork(MpiCommunicator& comm, AllReduceJobPtr job, std::string what, Tensor scaled,
                 double scale)
    : comm_(comm),
      job_(std::move(job)),
      what_(std::move(what)),
      scaled_(std::move(scaled)),
      scale_(scale) {
  comm_.started();
}

MpiWork::~MpiWork() {
  if (!done_) comm_.finished();
}

void MpiWork::complete() {
  done_ = true;
  comm_.finished();
  if (!scaled_.defined() || scaled_.numel() == 0) return;
  const std::int64_t n = scaled_.numel();
  if (scaled_.dtype() == DType::f32) {
    float* p = scaled_.data<float>();
    const float s = static_cast<float>(scale_);
    for (std::int64_t i = 0; i < n; ++i) p[i] *= s;
  } else {
    double* p = scaled_.data<double>();
    for (std::int64_t i = 0; i < n; ++i) p[i] *= scale_;
  }
}

bool MpiWork::test() {
  if (done_) return true;
  if (job_) {
    if (!job_->done.load(std::memory_order_acquire)) return false;
    comm_.check(job_->error, job_->failed_call);
    complete();
    return true;
  }
  int flag = 0;
  comm_.check(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
  if (flag) complete();
  return done_;
}

void MpiWork::wait() {
  if (done_) return;
  const double timeout = collective_timeout_seconds();
  const auto start = std::chrono::steady_clock::now();
  if (job_) {  // sleep until the communication thread is done (or the timeout)
    job_->wait_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(timeout)));
    if (test()) return;
    timed_out(timeout);
  }
  for (std::uint64_t spins = 0;; ++spins) {
    if (test()) return;
    if (yield_between_polls()) std::this_thread::yield();
    if ((spins & 1023) == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout)
      timed_out(timeout);
  }
}

void MpiWork::timed_out(double timeout) {
  comm_.mark_broken();
  throw Error(detail::str_cat("mpi ", what_, ": rank ", comm_.rank(), " of ", comm_.size(),
                              " waited ", timeout,
                              " s without completion (ANVIL_DIST_TIMEOUT); a peer rank "
                              "probably died or stalled"));
}

}  // namespace
}  // namespace anvil::dist

// The world communicator, created on the first call and destroyed (MPI_Finalize) at process exit.
// Returns nullptr and writes the reason into `error` when MPI cannot start.
extern "C" __attribute__((visibility("default"))) anvil::dist::Communicator* anvil_mpi_communicator(
    char* error, int error_size) {
  try {
    static anvil::dist::MpiCommunicator world;
    return &world;
  } catch (const std::exception& e) {
    std::snprintf(error, static_cast<std::size_t>(error_size), "%s", e.what());
    return nullptr;
  }
}
