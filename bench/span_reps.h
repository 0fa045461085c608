// SPDX-License-Identifier: Apache-2.0
// How many enqueues one timed span of a GPU benchmark holds (time_gpu_loop,
// bench/gpu_gemm_bench.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace anvil::bench {

// The number of enqueues per span: enough for `span_seconds` of GPU work when one enqueue takes
// `one_call_seconds` (1 to 1000), lowered to the largest divisor of `max_iterations`.
//
// Why a divisor: Google Benchmark runs every repetition of a benchmark with the same
// max_iterations and aborts the whole binary (ComputeStats' check, statistics.cc) when two
// repetitions report different iteration counts. A loop of KeepRunningBatch(reps) runs
// ceil(max_iterations / reps) * reps iterations, and reps comes from a timed probe that can
// differ between repetitions, so the counts differed and anvil_bench died in the 2026-11-28 H200
// run (the GPU LSTM rows with --benchmark_repetitions=2). With reps dividing max_iterations every
// repetition runs exactly max_iterations.
inline int span_reps(std::int64_t max_iterations, double one_call_seconds,
                     double span_seconds = 1e-3) {
  const double wanted = std::ceil(span_seconds / std::max(one_call_seconds, 1e-7));
  std::int64_t reps = static_cast<std::int64_t>(std::clamp(wanted, 1.0, 1000.0));
  reps = std::min<std::int64_t>(reps, std::max<std::int64_t>(max_iterations, 1));
  while (reps > 1 && max_iterations % reps != 0) --reps;
  return static_cast<int>(reps);
}

}  // namespace anvil::bench
