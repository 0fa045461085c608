// SPDX-License-Identifier: Apache-2.0
// Under `mpirun -np 2` (CTest dist_mpi): all-reduce (sum, average, max), broadcast and
// all-gather of the mpi communicator for f32, f64 and i64 at sizes 0, 1, odd and larger than a
// 25 MiB gradient bucket; reduce-scatter (MPI_Ireduce_scatter_block, and the backends' default);
// asynchronous forms; argument errors; the ranks' context line; the configuration handshake (Note
// [Configuration handshake]).
#include <catch2/catch.hpp>

#include <cstdlib>

#include <string>

#include "engine/distributed/communicator.h"
#include "engine/distributed/handshake.h"

using namespace anvil;

namespace {

dist::CommunicatorPtr world() { return dist::create_communicator("mpi"); }

// Rank r's value at i; sums over two ranks stay exact in f32.
double value(int rank, std::int64_t i) { return (rank + 1) * 1000.0 + static_cast<double>(i % 97); }

Tensor filled(DType d, std::int64_t n, int rank) {
  Tensor t = Tensor::empty({n}, d);
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = value(rank, i);
    if (d == DType::f32) t.data<float>()[i] = static_cast<float>(v);
    if (d == DType::f64) t.data<double>()[i] = v;
    if (d == DType::i64) t.data<std::int64_t>()[i] = static_cast<std::int64_t>(v);
  }
  return t;
}

double at(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::f32:
      return t.data<float>()[i];
    case DType::f64:
      return t.data<double>()[i];
    default:
      return static_cast<double>(t.data<std::int64_t>()[i]);
  }
}

std::vector<std::int64_t> sizes_for(DType d) {
  const std::int64_t bucket = 25 * 1048576 / static_cast<std::int64_t>(dtype_size(d));
  return {0, 1, 1001, bucket + 3};
}

}  // namespace

TEST_CASE("mpi communicator: two ranks, context line", "[dist]") {
  auto c = world();
  REQUIRE(c->size() == 2);
  REQUIRE(c->backend() == "mpi");
  REQUIRE(c->describe() == "mpi rank " + std::to_string(c->rank()) + "/2");
  REQUIRE(c->version().find("MPI") != std::string::npos);
  // See Note [MPI progress thread]: the context names it when ANVIL_MPI_PROGRESS=thread.
  const char* progress = std::getenv("ANVIL_MPI_PROGRESS");
  const bool thread = progress != nullptr && std::string(progress) == "thread";
  REQUIRE((c->version().find("progress thread") != std::string::npos) == thread);
}

TEST_CASE("mpi all_reduce sum/average/max for f32, f64, i64 at sizes 0, 1, odd, > bucket",
          "[dist]") {
  auto c = world();
  const int size = c->size();
  for (DType d : {DType::f32, DType::f64, DType::i64})
    for (std::int64_t n : sizes_for(d)) {
      INFO(dtype_name(d) << " x " << n);
      Tensor s = filled(d, n, c->rank());
      c->all_reduce(s, dist::ReduceOp::sum);
      Tensor m = filled(d, n, c->rank());
      c->all_reduce_async(m, dist::ReduceOp::max)->wait();
      Tensor a = filled(d, n, c->rank());
      if (is_floating(d)) c->all_reduce(a, dist::ReduceOp::average);
      bool ok = true;
      for (std::int64_t i = 0; i < n && ok; ++i) {
        double sum = 0;
        for (int r = 0; r < size; ++r) sum += value(r, i);
        ok = at(s, i) == sum && at(m, i) == value(size - 1, i) &&
             (!is_floating(d) || at(a, i) == sum / size);
        if (!ok) FAIL_CHECK("element " << i << ": " << at(s, i) << " " << at(m, i));
      }
      REQUIRE(ok);
    }
}

TEST_CASE("mpi broadcast and all_gather for f32, f64, i64 at sizes 0, 1, odd, > bucket", "[dist]") {
  auto c = world();
  for (DType d : {DType::f32, DType::f64, DType::i64})
    for (std::int64_t n : sizes_for(d)) {
      INFO(dtype_name(d) << " x " << n);
      for (int root = 0; root < c->size(); ++root) {
        Tensor b = filled(d, n, c->rank());
        c->broadcast_async(b, root)->wait();
        bool ok = true;
        for (std::int64_t i = 0; i < n && ok; ++i) ok = at(b, i) == value(root, i);
        REQUIRE(ok);
      }
      const Tensor in = filled(d, n, c->rank());
      const Tensor g = c->all_gather(in);
      REQUIRE(g.numel() == n * c->size());
      bool ok = true;
      for (int r = 0; r < c->size(); ++r)
        for (std::int64_t i = 0; i < n && ok; ++i) ok = at(g, r * n + i) == value(r, i);
      REQUIRE(ok);
    }
}

// Each rank's block of the reduction; the default (all-reduce of a copy, the single and nccl
// backends') through the base class gives the same values.
TEST_CASE("mpi reduce_scatter sum/average/max for f32, f64, i64 at sizes 0, 2, 2002, > bucket",
          "[dist]") {
  auto c = world();
  const int size = c->size();
  for (DType d : {DType::f32, DType::f64, DType::i64})
    for (std::int64_t k : {std::int64_t{0}, std::int64_t{1}, std::int64_t{1001},
                           25 * 1048576 / static_cast<std::int64_t>(dtype_size(d)) / 2 + 3}) {
      INFO(dtype_name(d) << " x " << k * size);
      const Tensor in = filled(d, k * size, c->rank());
      std::vector<dist::ReduceOp> ops = {dist::ReduceOp::sum, dist::ReduceOp::max};
      if (is_floating(d)) ops.push_back(dist::ReduceOp::average);
      for (dist::ReduceOp op : ops) {
        Tensor out = Tensor::empty({k}, d), via_default = Tensor::empty({k}, d);
        c->reduce_scatter_async(in, out, op)->wait();
        c->dist::Communicator::reduce_scatter_async(in, via_default, op)->wait();
        bool ok = true;
        for (std::int64_t i = 0; i < k && ok; ++i) {
          const std::int64_t j = c->rank() * k + i;  // this rank's block
          double sum = 0;
          for (int r = 0; r < size; ++r) sum += value(r, j);
          const double want = op == dist::ReduceOp::sum   ? sum
                              : op == dist::ReduceOp::max ? value(size - 1, j)
                                                          : sum / size;
          ok = at(out, i) == want && at(via_default, i) == want;
          if (!ok)
            FAIL_CHECK(dist::reduce_op_name(op) << " element " << i << ": " << at(out, i) << ", "
                                                << at(via_default, i) << ", want " << want);
        }
        REQUIRE(ok);
      }
    }
  Tensor odd = Tensor::zeros({5}), out = Tensor::zeros({2});
  REQUIRE_THROWS_WITH(c->reduce_scatter_async(odd, out, dist::ReduceOp::sum),
                      Catch::Contains("input of 5 elements does not divide into 2 equal blocks"));
  Tensor four = Tensor::zeros({4}), wrong = Tensor::zeros({3});
  REQUIRE_THROWS_WITH(c->reduce_scatter_async(four, wrong, dist::ReduceOp::sum),
                      Catch::Contains("output must hold 2 f32 elements"));
}

TEST_CASE("mpi asynchronous all_reduces in flight together, barrier", "[dist]") {
  auto c = world();
  std::vector<Tensor> ts;
  std::vector<dist::WorkPtr> ws;
  ts.reserve(5);
  ws.reserve(5);
  for (int k = 0; k < 5; ++k) ts.push_back(filled(DType::f32, 100000 + k, c->rank()));
  for (auto& t : ts) ws.push_back(c->all_reduce_async(t, dist::ReduceOp::sum));
  for (int spin = 0; spin < 10; ++spin) c->progress();
  for (auto& w : ws) w->wait();
  for (auto& w : ws) REQUIRE(w->test());
  for (int k = 0; k < 5; ++k) REQUIRE(at(ts[k], 96) == value(0, 96) + value(1, 96));
  c->barrier();
  REQUIRE(c->all_reduce_scalar(c->rank() + 1.0) == 3.0);
}

TEST_CASE("mpi collectives refuse bad arguments with the reason", "[dist]") {
  auto c = world();
  Tensor i = Tensor::zeros({4}, DType::i64);
  REQUIRE_THROWS_WITH(c->all_reduce(i, dist::ReduceOp::average),
                      Catch::Contains("average needs a floating dtype, got i64"));
  Tensor i32 = Tensor::zeros({4}, DType::i32);
  REQUIRE_THROWS_WITH(c->all_reduce(i32), Catch::Contains("dtype i32 is not supported"));
  Tensor nc = Tensor::zeros({4, 3}).t();
  REQUIRE_THROWS_WITH(c->broadcast(nc, 0), Catch::Contains("is not contiguous"));
  Tensor f = Tensor::zeros({4});
  REQUIRE_THROWS_WITH(c->broadcast(f, 5), Catch::Contains("root 5 outside [0, 2)"));
  Tensor small = Tensor::zeros({3});
  REQUIRE_THROWS_WITH(c->all_gather_async(f, small), Catch::Contains("output must hold 8"));
}

TEST_CASE("mpi configuration handshake: agreement passes, the first difference is named",
          "[dist]") {
  auto comm = world();
  const std::string mine = std::to_string(comm->rank());
  // Equal fields: nothing happens, and the communicator is usable after it.
  dist::agree_on_configuration(*comm, {{"model", "mlp", ""}, {"batch", "64", ""}});
  comm->barrier();
  // The first differing field, in order, with rank 0's and rank 1's values, on every rank.
  try {
    dist::agree_on_configuration(
        *comm,
        {{"model", "mlp", ""}, {"batch", comm->rank() == 0 ? "64" : "32", ""}, {"seed", mine, ""}});
    FAIL("no mismatch reported");
  } catch (const dist::RanksDisagree& e) {
    CHECK(std::string(e.what()) == "ranks disagree on batch: rank 0 has 64, rank 1 has 32");
    CHECK(e.rank() == comm->rank());
  }
  // A difference only in the key (or beyond the printed prefix) shows the hashes.
  try {
    const std::string longer(80, 'x');
    dist::agree_on_configuration(*comm,
                                 {{"shapes", "2 tensors", "[3]" + mine}, {"v", longer + mine, ""}});
    FAIL("no mismatch reported");
  } catch (const dist::RanksDisagree& e) {
    CHECK_THAT(e.what(),
               Catch::StartsWith("ranks disagree on shapes: rank 0 has 2 tensors (hash "));
  }
  // Different field lists (another build): slot 0 tells.
  std::vector<dist::HandshakeField> fields = {{"model", "mlp", ""}};
  if (comm->rank() == 1) fields.push_back({"extra", "1", ""});
  CHECK_THROWS_WITH(dist::agree_on_configuration(*comm, fields),
                    Catch::StartsWith("ranks disagree on the handshake (different anvil builds?)"));
  comm->barrier();
}
