// SPDX-License-Identifier: Apache-2.0
// Every op driver's problem groups on the GPU (harness/op_driver.h): each CUDA variant of each
// driven table, forced by name on every problem and pass, against `ref` in f64 on the host
// (tests/helpers/driver_loop.h). The CPU loop is tests/test_op_drivers.cpp.
#include <catch2/catch.hpp>

#include "harness/op_driver.h"
#include "helpers/driver_loop.h"

using namespace anvil;

TEST_CASE("op driver loop on cuda:0: every driver and group", "[cuda][drivers][variants]") {
  for (const harness::OpDriver* d : harness::drivers())
    for (const auto& group : d->groups()) {
      INFO(d->op() << " group " << group << " on cuda:0");
      // ref runs on the host only: the loop checks the CUDA variants.
      CHECK(test::run_driver_group(*d, group, Device::cuda(0), /*run_ref=*/false) > 0);
    }
}
