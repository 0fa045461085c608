// SPDX-License-Identifier: Apache-2.0
// Every op driver's problem groups on the GPU (harness/op_driver.h): each CUDA variant of each
// driven table, forced by name on every problem and pass, against `ref` in f64 on the host
// (tests/helpers/driver_loop.h). The CPU loop is tests/test_op_drivers.cpp. The conv2d layers
// have their own case: their f64 ref on the host takes most of a minute.
#include <catch2/catch.hpp>

#include "harness/op_driver.h"
#include "helpers/driver_loop.h"

using namespace anvil;

namespace {
bool is_conv_layers(const harness::OpDriver& d, const std::string& group) {
  return d.op() == "conv2d" && group == "layers";
}
}  // namespace

TEST_CASE("op driver loop on cuda:0: every driver and group but the conv2d layers",
          "[cuda][drivers][variants]") {
  for (const harness::OpDriver* d : harness::drivers())
    for (const auto& group : d->groups()) {
      if (is_conv_layers(*d, group)) continue;
      INFO(d->op() << " group " << group << " on cuda:0");
      // ref is a CPU variant: on cuda:0 the loop runs the CUDA variants.
      CHECK(test::run_driver_group(*d, group, Device::cuda(0)) > 0);
    }
}

TEST_CASE("op driver loop on cuda:0: the conv2d layers", "[cuda][drivers][variants][conv]") {
  CHECK(test::run_driver_group(*harness::find_driver("conv2d"), "layers", Device::cuda(0)) > 0);
}
