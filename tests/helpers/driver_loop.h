// SPDX-License-Identifier: Apache-2.0
#pragma once
// The op tests as one loop (issue 32, point 2): driver x device x variant x problem. For each
// problem and each pass the driver lists, every variant of the device runs on the driver's case
// (prepare, run, check against ref; Note [Op drivers] in harness/op_driver.h) through the
// variant harness, with its rules: a declining variant states its reason, and one that runs
// fewer (problem, pass) pairs than the stated minimum fails (tests/helpers/variant_harness.h).
// Shared by tests/test_op_drivers.cpp (CPU) and tests/cuda/test_cuda_op_drivers.cpp (GPU).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/core/device.h"
#include "harness/op_driver.h"

namespace anvil::test {

struct DriverLoopOptions {
  int minimum = 1;         // (problem, pass) pairs every non-ref variant must run
  bool run_ref = true;     // also check ref on the device against ref in f64 on the host
  std::uint64_t seed = 1;  // the first case's seed; each case takes the next
};

// Runs `problems` (moved to `device`) through the loop; returns the (problem, pass) pairs run.
// `ran`, when given, gets the pairs each variant ran.
int run_driver_loop(const harness::OpDriver& driver, const std::vector<nn::NamedProblem>& problems,
                    const Device& device, const DriverLoopOptions& options,
                    std::map<std::string, int>* ran = nullptr);

// A driver's group on `device` with the driver's stated minimum.
int run_driver_group(const harness::OpDriver& driver, const std::string& group,
                     const Device& device, bool run_ref = true);

}  // namespace anvil::test
