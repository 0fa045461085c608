// SPDX-License-Identifier: Apache-2.0
#pragma once
// Pieces shared by the gemm/ (bench/gemm_bench.cpp) and gemm_remedy/ (bench/gemm_remedy_bench.cpp)
// families: the shape list, the operand buffers, the variant list, the sampled validation, the
// timed loop with its counters and the registration settings.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/dispatch/selection.h"

namespace anvil::bench {

struct Shape3 {
  std::string name;
  std::int64_t m, n, k;
};

// The DLBench shape (M=1024, N=2048, K=26752) and the distinct GEMM shapes of FCN-5 at batch 64.
std::vector<Shape3> gemm_shapes();
// "default" (anvil's own selection) and every CPU variant of the gemm table except ref.
std::vector<std::string> gemm_bench_variants();

// Operand buffers per (m, n, k), allocated on first use and shared by all variants and modes (a
// transposed operand has the same element count, only the layout differs): a has M*K elements,
// b K*N, c M*N; a and b are uniform in [-1, 1].
struct GemmBuffers {
  Tensor a, b, c;
};
GemmBuffers& gemm_buffers(const Shape3& s);

// A 2-D view [rows, cols] of a flat buffer.
Tensor as_matrix(const Tensor& flat, std::int64_t rows, std::int64_t cols);

// Note [Validate before timing] (bench/gemm_bench.cpp): recomputes 48 sampled entries of
// C = op(A) op(B) in double; empty when they all match (|C - ref| <= rel_tol * sum |a||b| + 1e-6),
// else a message naming the entry. A, B, C are dense host tensors. rel_tol is looser only for
// reduced-precision variants (Note [GPU GEMM validation], bench/gpu_gemm_bench.h).
std::string sampled_mismatch(const Tensor& A, bool ta, const Tensor& B, bool tb, const Tensor& C,
                             double rel_tol = 1e-5);

// Forces the gemm variant for the scope of the returned guard; none for "default".
std::unique_ptr<ForceVariant> force_gemm_variant(const std::string& variant);

// The timed loop of a GEMM benchmark: runs `body` once per iteration (real time, the caller has
// warmed up and validated), then sets the FLOP/s counter (`flops` per iteration) and pct_peak.
// Returns the loop's wall time in seconds.
double time_gemm_loop(benchmark::State& state, int threads, double flops,
                      const std::function<void()>& body);

// Registers `fn` as `name` with the GEMM families' settings: real time, ms, at least 0.5 s timed,
// and 0.2 s of warm-up iterations, except for shapes of >= kSelfWarmingFlops: their untimed
// validation call (every GEMM benchmark makes one before its loop) already takes ~0.2 s or more
// at this machine's peak and is their warm-up; another call would only add a second per benchmark.
constexpr double kSelfWarmingFlops = 2e10;
void register_gemm_benchmark(const std::string& name, const Shape3& shape,
                             std::function<void(benchmark::State&)> fn);

}  // namespace anvil::bench
