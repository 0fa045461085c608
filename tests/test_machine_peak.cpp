// SPDX-License-Identifier: Apache-2.0
// The machine-peak measurements (kernels/cpu/peak/machine_peak.h): each is positive exactly where
// the CPU has its instructions, and scales with the work it counts. Their speed is measured in
// the peak/ benchmarks, not here.
#include <catch2/catch.hpp>

#include "kernels/cpu/peak/machine_peak.h"

using namespace anvil;

TEST_CASE("the FMA peak is measured where the CPU has AVX2 or AVX-512", "[peak]") {
  const std::string isa = fma_isa();
  const double flops = measure_fma_flops(1, 0.05);
  if (isa == "none")
    CHECK(flops == 0);
  else
    CHECK(flops > 1e9);  // any AVX2 core does over 1 GFLOP/s of FMAs
}

TEST_CASE("the bf16 dot peak is measured exactly where the CPU has avx512_bf16", "[peak][bf16]") {
  const double flops = measure_bf16_dot_flops(1, 0.05);
  if (!has_bf16_dot()) {
    WARN("this CPU has no avx512_bf16: the bf16 dot peak is 0 by definition");
    CHECK(flops == 0);
    return;
  }
  // vdpbf16ps does 64 FLOPs an instruction; a core that has it does well over 10 GFLOP/s.
  CHECK(flops > 1e10);
  CHECK(measure_bf16_dot_flops(2, 0.05) > 0);
}
