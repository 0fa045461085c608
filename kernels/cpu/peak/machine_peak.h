// SPDX-License-Identifier: Apache-2.0
#pragma once
// The machine's own ceilings, measured in-process so that "% of peak" is against this machine,
// not a datasheet: FP32 FMA throughput and STREAM-triad memory bandwidth. Used by anvil_bench
// ("% of peak", the peak/ benchmarks) and `anvil info`.
#include <cstdint>

namespace anvil {

// FP32 FLOP/s of independent FMA chains on `threads` threads for about `seconds`
// (AVX-512 when the CPU has it, else AVX2+FMA, else 0).
double measure_fma_flops(int threads, double seconds);
// Name of the ISA measure_fma_flops uses ("avx512", "avx2" or "none").
const char* fma_isa();
// FLOP/s of independent bf16 dot-product chains (vdpbf16ps: 32 bf16 products summed into 16
// f32 lanes, 64 FLOPs) on `threads` threads for about `seconds`: the ceiling of the bf16 GEMM
// and convolution variants. 0 on a CPU without avx512_bf16.
double measure_bf16_dot_flops(int threads, double seconds);
bool has_bf16_dot();
// Bytes/s of a[i] = b[i] + s * c[i] over `n` floats per array (3 arrays), `reps` passes.
double measure_triad_bandwidth(int threads, std::int64_t n, int reps);

}  // namespace anvil
