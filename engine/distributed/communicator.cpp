// SPDX-License-Identifier: Apache-2.0
// The parts of the communicator layer every backend shares (argument checks, blocking helpers,
// the timeout), the "single" backend, and create_communicator(): "mpi" dlopen()s
// libanvil_mpi.so (Note [Communicator layering]), "nccl" is nccl_communicator.cpp.
#include "engine/distributed/communicator.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "engine/core/config.h"
#include "engine/core/error.h"
#include "engine/core/parse_number.h"

namespace anvil::dist {

CommunicatorPtr create_nccl_communicator();  // nccl_communicator.cpp

namespace {
// A finished operation.
class DoneWork final : public Work {
 public:
  bool test() override { return true; }
  void wait() override {}
};
}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::average:
      return "average";
    case ReduceOp::max:
      return "max";
  }
  return "?";
}

void check_collective(const char* op, const Tensor& t, ReduceOp reduce, bool reducing) {
  ANVIL_CHECK(t.defined(), op, "undefined tensor");
  ANVIL_CHECK(t.is_contiguous(), op, "tensor ", shape_str(t.sizes()), " is not contiguous");
  const DType d = t.dtype();
  ANVIL_CHECK(d == DType::f32 || d == DType::f64 || d == DType::i64, op, "dtype ", dtype_name(d),
              " is not supported (f32, f64, i64)");
  ANVIL_CHECK(!(reducing && reduce == ReduceOp::average && !is_floating(d)), op,
              "average needs a floating dtype, got ", dtype_name(d));
}

void check_all_reduce(const char* op, const Tensor& t, ReduceOp reduce) {
  if (!t.defined() || t.dtype() != DType::bf16) {
    check_collective(op, t, reduce, true);
    return;
  }
  // Note [bf16 gradient buckets]: the backends sum bf16 pairwise in f32; average and max are
  // not needed by the buckets (DataParallel scales in f32 after the cast back).
  ANVIL_CHECK(t.is_contiguous(), op, "tensor ", shape_str(t.sizes()), " is not contiguous");
  ANVIL_CHECK(reduce == ReduceOp::sum, op,
              "bf16 takes sum only (the gradient buckets' wire "
              "format), got ",
              reduce_op_name(reduce));
}

Tensor Communicator::all_gather(const Tensor& in) {
  Tensor out = Tensor::empty({in.numel() * size()}, in.dtype(), in.device());
  all_gather_async(in, out)->wait();
  return out;
}

// Checks shared by every backend's reduce-scatter.
void check_reduce_scatter(const char* op, const Tensor& in, const Tensor& out, ReduceOp reduce,
                          int ranks) {
  check_collective(op, in, reduce, true);
  check_collective(op, out, reduce, true);
  ANVIL_CHECK(in.numel() % ranks == 0, op, "input of ", in.numel(),
              " elements does not divide into ", ranks, " equal blocks");
  ANVIL_CHECK(
      out.dtype() == in.dtype() && out.numel() == in.numel() / ranks && out.device() == in.device(),
      op, "output must hold ", in.numel() / ranks, " ", dtype_name(in.dtype()), " elements on ",
      in.device(), ", got ", out.numel(), " ", dtype_name(out.dtype()), " on ", out.device());
}

WorkPtr Communicator::reduce_scatter_async(const Tensor& in, Tensor& out, ReduceOp op) {
  check_reduce_scatter("reduce_scatter", in, out, op, size());
  Tensor all = in.clone();
  all_reduce(all, op);
  const std::int64_t k = out.numel();
  if (k > 0) out.copy_(all.slice(0, rank() * k, (rank() + 1) * k));
  return std::make_shared<DoneWork>();
}

double Communicator::all_reduce_scalar(double value, ReduceOp op) {
  Tensor t = Tensor::from_vector(std::vector<double>{value}, {1});
  all_reduce(t, op);
  return t.data<double>()[0];
}

std::string Communicator::describe() const {
  return backend() + " rank " + std::to_string(rank()) + "/" + std::to_string(size());
}

double collective_timeout_seconds() {
  const std::string v = env_or_empty("ANVIL_DIST_TIMEOUT");
  if (v.empty()) return 60.0;  // Note [Collective timeout]
  char* end = nullptr;
  const double s = std::strtod(v.c_str(), &end);
  ANVIL_CHECK(end != v.c_str() && *end == '\0' && s > 0, "ANVIL_DIST_TIMEOUT",
              "expected a positive number of seconds, got '", v, "'");
  return s;
}

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"}) {
    const std::string v = env_or_empty(name);
    if (v.empty()) continue;
    // Set by the launcher, not by hand; still, a value that is not a rank count is named
    // rather than read as 0 (std::atoi) or as a huge job.
    const auto n = parse_number<int>(v);
    ANVIL_CHECK(n.has_value() && *n >= 1, "launcher_world_size", name,
                ": expected a positive number of ranks, got '", v, "'");
    return *n;
  }
  return 1;
}

namespace {

// One process: every collective is the identity (average of one value is the value).
class SingleCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }
  std::string version() const override { return "single process"; }
  WorkPtr all_reduce_async(Tensor& t, ReduceOp op) override {
    check_all_reduce("single all_reduce", t, op);
    return std::make_shared<DoneWork>();
  }
  WorkPtr broadcast_async(Tensor& t, int root) override {
    check_collective("single broadcast", t, ReduceOp::sum, false);
    ANVIL_CHECK(root == 0, "single broadcast", "root ", root, " outside [0, 1)");
    return std::make_shared<DoneWork>();
  }
  WorkPtr all_gather_async(const Tensor& in, Tensor& out) override {
    check_collective("single all_gather", in, ReduceOp::sum, false);
    check_collective("single all_gather", out, ReduceOp::sum, false);
    ANVIL_CHECK(out.numel() == in.numel() && out.dtype() == in.dtype(), "single all_gather",
                "output of ", out.numel(), " ", dtype_name(out.dtype()), " elements, expected ",
                in.numel(), " ", dtype_name(in.dtype()));
    if (in.numel() > 0 && out.data_ptr() != in.data_ptr()) out.copy_(in);
    return std::make_shared<DoneWork>();
  }
  void barrier() override {}
};

// libanvil_mpi.so, from the directory of libanvil (as libanvil_cuda.so) or ANVIL_MPI_LIBRARY.
CommunicatorPtr load_mpi() {
  static std::mutex mu;
  static CommunicatorPtr world;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mu);
  if (world) return world;
  ANVIL_CHECK(failure.empty(), "create_communicator(\"mpi\")", failure);
  std::string path = env_or_empty("ANVIL_MPI_LIBRARY");
  if (path.empty()) {
    Dl_info info{};
    std::string dir;
    if (dladdr(reinterpret_cast<void*>(&load_mpi), &info) != 0 && info.dli_fname != nullptr) {
      dir = info.dli_fname;
      dir = dir.substr(0, dir.rfind('/') + 1);
    }
    path = dir + "libanvil_mpi.so";
  }
  // RTLD_GLOBAL: Open MPI's own plugins (mca_*.so) resolve symbols of libmpi.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    failure = "the MPI backend library is not loadable (" + path + "): " + (err ? err : "?") +
              "; build anvil with Open MPI (libopenmpi-dev, -DANVIL_WITH_MPI=ON)";
    ANVIL_CHECK(false, "create_communicator(\"mpi\")", failure);
  }
  using Entry = Communicator* (*)(char* error, int error_size);
  auto entry = reinterpret_cast<Entry>(dlsym(handle, "anvil_mpi_communicator"));
  ANVIL_CHECK(entry != nullptr, "create_communicator(\"mpi\")", path,
              " has no entry point anvil_mpi_communicator");
  char error[1024] = {0};
  Communicator* c = entry(error, sizeof error);
  if (c == nullptr) {
    failure = error;
    ANVIL_CHECK(false, "create_communicator(\"mpi\")", failure);
  }
  // The module owns the world communicator for the life of the process (MPI cannot be
  // initialised twice): a non-owning shared_ptr.
  world = CommunicatorPtr(c, [](Communicator*) {});
  return world;
}

}  // namespace

const char* all_reduce_algorithm_name(AllReduceAlgorithm a) {
  switch (a) {
    case AllReduceAlgorithm::libnbc:
      return "libnbc";
    case AllReduceAlgorithm::chunked:
      return "chunked";
    case AllReduceAlgorithm::ring:
      return "ring";
    case AllReduceAlgorithm::automatic:
      return "auto";
  }
  return "?";
}

AllReduceAlgorithm all_reduce_algorithm_from_env() {
  const char* v = std::getenv("ANVIL_ALLREDUCE");
  if (v == nullptr || v[0] == '\0') return AllReduceAlgorithm::libnbc;
  for (auto a : {AllReduceAlgorithm::libnbc, AllReduceAlgorithm::chunked, AllReduceAlgorithm::ring,
                 AllReduceAlgorithm::automatic})
    if (std::strcmp(v, all_reduce_algorithm_name(a)) == 0) return a;
  fail_config("ANVIL_ALLREDUCE", "expected libnbc, chunked, ring or auto, got '", v, "'");
}

std::int64_t all_reduce_chunk_bytes_from_env() {
  const char* v = std::getenv("ANVIL_ALLREDUCE_CHUNK_KIB");
  if (v == nullptr || v[0] == '\0') return std::int64_t{8} << 20;
  const auto kib = parse_number<long>(v);
  // 64 MiB at most: a chunk's element count must fit MPI's int at any dtype.
  ANVIL_CHECK_CONFIG(kib.has_value() && *kib >= 1 && *kib <= 65536, "ANVIL_ALLREDUCE_CHUNK_KIB",
                     "expected KiB in [1, 65536], got '", v, "'");
  return static_cast<std::int64_t>(*kib) << 10;
}

AllReduceAlgorithm resolve_all_reduce(AllReduceAlgorithm a, std::int64_t bytes) {
  if (a != AllReduceAlgorithm::automatic) return a;
  return bytes < (std::int64_t{1} << 20) ? AllReduceAlgorithm::libnbc : AllReduceAlgorithm::chunked;
}

// Also the nccl backend's bootstrap: its MPI module reads the same variables, so a bad one is
// refused here under --dist nccl too, not as a failure inside the module (exit 1).
CommunicatorPtr create_mpi_for_bootstrap() {
  // A bad algorithm or chunk is the user's configuration error (exit 2), named before MPI
  // starts; the module reads the same values (Note [All-reduce algorithms]).
  all_reduce_algorithm_from_env();
  all_reduce_chunk_bytes_from_env();
  return load_mpi();
}

CommunicatorPtr create_communicator(const std::string& name) {
  if (name == "single") return std::make_shared<SingleCommunicator>();
  if (name == "auto") return create_communicator(launcher_world_size() > 1 ? "mpi" : "single");
  if (name == "mpi") return create_mpi_for_bootstrap();
  if (name == "nccl") return create_nccl_communicator();
  ANVIL_CHECK(false, "create_communicator", "unknown backend '", name,
              "'; expected single, mpi, nccl or auto");
  return nullptr;
}

}  // namespace anvil::dist
