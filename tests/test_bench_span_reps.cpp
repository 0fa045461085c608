// SPDX-License-Identifier: Apache-2.0
// span_reps (bench/span_reps.h): the enqueues per timed span of a GPU benchmark divide Google
// Benchmark's max_iterations, so every repetition runs the same iteration count.
#include <catch2/catch.hpp>

#include "bench/span_reps.h"

using anvil::bench::span_reps;

TEST_CASE("span_reps fills about 1 ms and divides max_iterations", "[bench]") {
  // A 10 us enqueue wants 100 per span; 1000 iterations take 100.
  CHECK(span_reps(1000, 10e-6) == 100);
  // 1550 = 2 * 5^2 * 31 is not a multiple of 100: its largest divisor below is 62.
  CHECK(span_reps(1550, 10e-6) == 62);
  // A prime count leaves one enqueue per span; a long enqueue needs one per span anyway.
  CHECK(span_reps(997, 10e-6) == 1);
  CHECK(span_reps(1000, 5e-3) == 1);
  // Never more than the iterations asked for (Google Benchmark's probing starts at 1), never
  // more than 1000, never 0.
  CHECK(span_reps(1, 1e-9) == 1);
  CHECK(span_reps(10, 1e-9) == 10);
  CHECK(span_reps(1000000, 1e-9) == 1000);
  CHECK(span_reps(0, 1e-6) == 1);
  // The property the abort came from: two probes of one benchmark (different enqueue times)
  // give the same loop count ceil(n / reps) * reps = n.
  for (long long n : {1LL, 7LL, 10LL, 64LL, 100LL, 1234LL, 5000LL, 77777LL}) {
    for (double one : {2e-6, 3.1e-6, 9e-6, 4e-4}) {
      const long long reps = span_reps(n, one);
      INFO("n " << n << " one " << one);
      CHECK(n % reps == 0);
      CHECK((n + reps - 1) / reps * reps == n);
    }
  }
}
