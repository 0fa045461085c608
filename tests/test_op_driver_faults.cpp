// SPDX-License-Identifier: Apache-2.0
// The op drivers' checks fail on wrong variants (harness/op_driver.h): test variants added to
// the gemm and conv2d tables at run time, one off by one in a single element, one that leaves
// an element unwritten. Its own binary: the variants stay in the tables for the process, and
// the loop tests (tests/test_op_drivers.cpp) must not see them.
#include <catch2/catch.hpp>

#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/gemm_problem.h"
#include "harness/op_driver.h"
#include "harness/problem_descriptor.h"
#include "kernels/register.h"

using namespace anvil;
using Catch::Contains;

TEST_CASE("a driver's check finds a gemm variant that is off in one element", "[drivers]") {
  register_builtin_kernels();
  const auto* ref = gemm_table().find("ref");
  REQUIRE(ref != nullptr);
  gemm_table().add(VariantPlace::last(),
                   {.name = "test.off_by_one",
                    .supports = ref->supports,
                    .fn =
                        [fn = ref->fn](const GemmArgs& a) {
                          fn(a);
                          const GemmProblem& p = a.problem;
                          static_cast<float*>(a.c)[(p.m - 1) * p.ldc + p.n - 1] += 1.0f;
                        },
                    .description = "ref, then the last element of C + 1: wrong on purpose"});
  const harness::OpDriver* d = harness::find_driver("gemm");
  REQUIRE(d != nullptr);
  for (bool beta_zero : {true, false}) {
    GemmProblem p = GemmProblem::dense(7, 9, 33, false, true);
    p.beta_zero = beta_zero;
    const auto c = d->make_case(p, 3);
    c->prepare("ref");
    c->run();
    CHECK(c->check().empty());
    c->prepare("test.off_by_one");
    c->run();
    CHECK_THAT(c->check(), Contains("C: scaled error") && Contains("flat 62"));
  }
}

TEST_CASE("a driver's check finds a conv2d variant that leaves an element unwritten", "[drivers]") {
  register_builtin_kernels();
  const auto* ref = conv_table().find("ref");
  REQUIRE(ref != nullptr);
  conv_table().add(
      VariantPlace::last(),
      {.name = "test.unwritten",
       .supports = ref->supports,
       .fn =
           [fn = ref->fn](const ConvArgs& a) {
             // The first element of the pass's output keeps what was there.
             const ConvProblem& p = a.problem;
             void* out = p.pass == ConvPass::forward         ? a.y
                         : p.pass == ConvPass::backward_data ? a.dx
                                                             : a.dw;
             const float keep = *static_cast<float*>(out);
             fn(a);
             *static_cast<float*>(out) = keep;
           },
       .description = "ref, but the first output element unwritten: wrong on purpose"});
  const harness::OpDriver* d = harness::find_driver("conv2d");
  REQUIRE(d != nullptr);
  const OpProblem p = harness::parse_op_problem("conv2d:mb2ic3ih6oc4kh3ph1:bias");
  for (const OpProblem& pass : d->passes(p)) {
    const auto c = d->make_case(pass, 5);
    c->prepare("test.unwritten");
    c->run();
    CHECK_THAT(c->check(), Contains("scaled error inf") && Contains("flat 0: got nan"));
  }
}
