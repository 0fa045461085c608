// SPDX-License-Identifier: Apache-2.0
// Under `mpirun -np 2` with ANVIL_ALLREDUCE=libnbc|chunked|ring|auto and a small
// ANVIL_ALLREDUCE_CHUNK_KIB (CTest dist_allreduce_<algorithm>, Note [All-reduce algorithms]):
// the algorithm that runs is the one asked for, and its all-reduce equals a reference computed
// here in the same order, bit for bit in f64 and within 1 ulp per rank in f32, at sizes 0, 1,
// odd, just above one chunk and several chunks with a remainder; i64 exactly; and the bf16 sum
// of gradient buckets (Note [bf16 summing MPI_Op]) against the exact sum rounded once, bit for
// bit.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/core/half_types.h"
#include "engine/core/parse_number.h"
#include "engine/distributed/communicator.h"

using namespace anvil;

namespace {

// Values whose sums round (unlike small integers), different on every rank and element.
double value(int rank, std::int64_t i) {
  return std::sin(0.37 * static_cast<double>(i) + 1.3 * rank) * (1.0 + 0.01 * rank) +
         1e-3 * (i % 11);
}

std::int64_t chunk_bytes() {
  const char* v = std::getenv("ANVIL_ALLREDUCE_CHUNK_KIB");
  const auto kib = parse_number<long>(v != nullptr && v[0] != '\0' ? v : "8192");
  REQUIRE(kib.has_value());
  return static_cast<std::int64_t>(*kib) << 10;
}

template <typename T>
void check_sum(dist::Communicator& c, std::int64_t n) {
  const DType d = sizeof(T) == 8 ? DType::f64 : DType::f32;
  Tensor t = Tensor::empty({n}, d);
  for (std::int64_t i = 0; i < n; ++i) t.data<T>()[i] = static_cast<T>(value(c.rank(), i));
  c.all_reduce(t, dist::ReduceOp::sum);
  std::int64_t off = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    T want = 0;  // the ranks' values summed in rank order, in T
    for (int r = 0; r < c.size(); ++r) want += static_cast<T>(value(r, i));
    const T got = t.data<T>()[i];
    // f64: bit for bit; f32: within 1 ulp per rank (the order of the sum may differ).
    if constexpr (sizeof(T) == 8) {  // the same bits (and so the same sign of zero)
      if (std::bit_cast<std::uint64_t>(got) != std::bit_cast<std::uint64_t>(want)) ++off;
    } else {
      const T ulp = std::nextafter(std::fabs(want), T(INFINITY)) - std::fabs(want);
      if (!(std::fabs(got - want) <= ulp * static_cast<T>(c.size()))) ++off;
    }
  }
  INFO("n = " << n << " " << dtype_name(d) << ": " << off << " element(s) off");
  REQUIRE(off == 0);
}

// Rank r's bf16 element i: first the cases where rounding matters (ties to even, overflow to
// Inf, Inf - Inf, cancellation to +0, subnormals, NaN), then values of nearby magnitudes whose
// sums round, and every 7th a value far smaller than its partner's.
std::uint16_t bf16_input(int rank, std::int64_t i) {
  // {rank 0, rank 1} pairs of bit patterns.
  static const std::uint16_t kSpecial[][2] = {
      {0x3f80, 0x3b80},  // 1 + 2^-8: the tie between 1 and 1 + 2^-7, to even (1)
      {0x3f81, 0x3b80},  // (1 + 2^-7) + 2^-8: a tie, to even (1 + 2^-6)
      {0x7f7f, 0x7f7f},  // the largest finite twice: +Inf
      {0x7f80, 0xff80},  // Inf + -Inf: NaN
      {0x4049, 0xc049},  // x + -x: +0
      {0x0001, 0x0001},  // the smallest subnormals
      {0x8000, 0x8000},  // -0 + -0 = -0
      {0x7fc0, 0x3f80},  // NaN + 1
  };
  constexpr std::int64_t kSpecials = sizeof(kSpecial) / sizeof(kSpecial[0]);
  if (i < kSpecials) return kSpecial[i][rank % 2];
  double v = value(rank, i);
  if (i % 7 == 0 && rank == 1) v *= 1e-4;
  return BFloat16(v).bits;
}

// The exact sum of the ranks' values rounded once to bf16: each bf16 is exact in double, a sum
// of two is rounded there with 53 bits (>= 2 x 8 + 2, so no double rounding), then to bf16
// through BFloat16(double) (round to odd, then to nearest even: Note [Half storage types]).
std::uint16_t bf16_reference(int ranks, std::int64_t i) {
  const auto at = [&](int r) {
    return static_cast<double>(BFloat16::from_bits(bf16_input(r, i)).to_float());
  };
  double sum = at(0);  // not 0.0 + ...: -0 + -0 must stay -0
  for (int r = 1; r < ranks; ++r) sum += at(r);
  return BFloat16(sum).bits;
}

void check_bf16_sum(dist::Communicator& c, std::int64_t n) {
  Tensor t = Tensor::empty({n}, DType::bf16);
  auto* p = static_cast<std::uint16_t*>(t.data_ptr());
  for (std::int64_t i = 0; i < n; ++i) p[i] = bf16_input(c.rank(), i);
  c.all_reduce(t, dist::ReduceOp::sum);
  std::int64_t off = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t want = bf16_reference(c.size(), i), got = p[i];
    const bool both_nan = std::isnan(BFloat16::from_bits(want).to_float()) &&
                          std::isnan(BFloat16::from_bits(got).to_float());
    if (got != want && !both_nan) {
      if (off < 5)
        UNSCOPED_INFO("element " << i << ": got 0x" << std::hex << got << ", want 0x" << want
                                 << std::dec);
      ++off;
    }
  }
  INFO("n = " << n << " bf16: " << off << " element(s) off");
  REQUIRE(off == 0);
}

}  // namespace

// 2 ranks: one addition per element, so the result is the exact sum rounded once whatever the
// algorithm; beyond 2 ranks the order of the partial sums would matter.
TEST_CASE("mpi all_reduce of bf16 sums pairs in f32, rounded once, bit for bit", "[dist]") {
  auto c = dist::create_communicator("mpi");
  REQUIRE(c->size() == 2);
  const std::int64_t chunk = chunk_bytes();
  for (const std::int64_t n :
       {std::int64_t{0}, std::int64_t{8}, std::int64_t{1001}, chunk / 2 + 3, 3 * (chunk / 2) + 5})
    check_bf16_sum(*c, n);
  // bf16 is the gradient buckets' wire format: sum only.
  Tensor t = Tensor::zeros({4}, DType::bf16);
  REQUIRE_THROWS_WITH(c->all_reduce(t, dist::ReduceOp::average),
                      Catch::Contains("bf16 takes sum only") && Catch::Contains("average"));
  REQUIRE_THROWS_WITH(c->all_reduce(t, dist::ReduceOp::max),
                      Catch::Contains("bf16 takes sum only"));
  REQUIRE_THROWS_WITH(c->broadcast(t, 0), Catch::Contains("dtype bf16 is not supported"));
}

TEST_CASE("mpi all_reduce: the algorithm asked for runs and equals the reference", "[dist]") {
  auto c = dist::create_communicator("mpi");
  REQUIRE(c->size() == 2);
  const char* env = std::getenv("ANVIL_ALLREDUCE");
  const std::string asked = env != nullptr && env[0] != '\0' ? env : "libnbc";
  const std::int64_t chunk = chunk_bytes();
  // The name of what runs for a large tensor (auto: chunked above 1 MiB).
  const std::string large = c->all_reduce_algorithm(std::int64_t{64} << 20);
  const std::string want = asked == "auto" ? "chunked" : asked;
  INFO("ANVIL_ALLREDUCE=" << asked << " runs " << large);
  REQUIRE(large.rfind(want + " ", 0) == 0);
  if (asked == "auto") REQUIRE(c->all_reduce_algorithm(1024).rfind("libnbc", 0) == 0);

  for (const std::int64_t n :
       {std::int64_t{0}, std::int64_t{1}, std::int64_t{1001}, chunk / 8 + 3, 3 * (chunk / 8) + 5}) {
    check_sum<double>(*c, n);
    check_sum<float>(*c, n);
  }
  // Several chunks in f32 too (a chunk holds twice as many f32 elements).
  check_sum<float>(*c, 5 * (chunk / 4) + 7);

  SECTION("average and max, several chunks") {
    const std::int64_t n = 2 * (chunk / 8) + 9;
    Tensor a = Tensor::empty({n}, DType::f64), m = Tensor::empty({n}, DType::f64);
    for (std::int64_t i = 0; i < n; ++i)
      a.data<double>()[i] = m.data<double>()[i] = value(c->rank(), i);
    c->all_reduce(a, dist::ReduceOp::average);
    c->all_reduce(m, dist::ReduceOp::max);
    std::int64_t off = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double v0 = value(0, i), v1 = value(1, i);
      if (a.data<double>()[i] != (v0 + v1) * 0.5) ++off;
      if (m.data<double>()[i] != std::max(v0, v1)) ++off;
    }
    REQUIRE(off == 0);
  }
  SECTION("i64 sum and max, several chunks") {
    const std::int64_t n = 3 * (chunk / 8) + 11;
    Tensor s = Tensor::empty({n}, DType::i64), m = Tensor::empty({n}, DType::i64);
    const auto v = [](int rank, std::int64_t i) { return (rank + 1) * 1000003 * (i % 89) - i; };
    for (std::int64_t i = 0; i < n; ++i)
      s.data<std::int64_t>()[i] = m.data<std::int64_t>()[i] = v(c->rank(), i);
    c->all_reduce(s, dist::ReduceOp::sum);
    c->all_reduce(m, dist::ReduceOp::max);
    std::int64_t off = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      if (s.data<std::int64_t>()[i] != v(0, i) + v(1, i)) ++off;
      if (m.data<std::int64_t>()[i] != std::max(v(0, i), v(1, i))) ++off;
    }
    REQUIRE(off == 0);
  }
  SECTION("several all-reduces in flight complete in order") {
    std::vector<Tensor> ts;
    std::vector<dist::WorkPtr> works;
    for (int k = 0; k < 4; ++k) {
      ts.push_back(Tensor::full({chunk / 8 + k}, static_cast<double>(c->rank() + k), DType::f64));
      works.push_back(c->all_reduce_async(ts.back(), dist::ReduceOp::sum));
    }
    for (int k = 3; k >= 0; --k) works[static_cast<std::size_t>(k)]->wait();
    for (int k = 0; k < 4; ++k) {
      const Tensor& t = ts[static_cast<std::size_t>(k)];
      REQUIRE(t.data<double>()[0] == 1.0 + 2 * k);
      REQUIRE(t.data<double>()[t.numel() - 1] == 1.0 + 2 * k);
    }
  }
}
