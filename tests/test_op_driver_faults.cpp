// SPDX-License-Identifier: Apache-2.0
// The op drivers' checks fail on wrong variants (harness/op_driver.h): test variants added to
// the tables at run time: a gemm variant off by one in a single element, a conv2d one that
// leaves an element unwritten, an elementwise one off in its last element, a reduce sum that
// ignores its scale, a softmax one that leaves the log-sum-exp unwritten, an embedding backward
// that differs from run to run and a dropout variant that draws another stream than ref. Its own
// binary: the variants stay in the tables for the process, and the loop tests
// (tests/test_op_drivers.cpp) must not see them.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>

#include "engine/core/random.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/dropout_problem.h"
#include "engine/dispatch/elementwise_problem.h"
#include "engine/dispatch/embedding_problem.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/reduce_problem.h"
#include "engine/dispatch/softmax_problem.h"
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

namespace {

// The check of `variant` on the problem of `text` ("<op>:<descriptor>"), after ref passes it.
std::string check_of(const std::string& text, const std::string& variant) {
  const OpProblem p = harness::parse_op_problem(text);
  const harness::OpDriver* d = harness::find_driver(op_name(p));
  REQUIRE(d != nullptr);
  const auto c = d->make_case(p, 7);
  c->prepare("ref");
  c->run();
  CHECK(c->check().empty());
  c->prepare(variant);
  c->run();
  return c->check();
}

// `table`'s ref, then `spoil` on the arguments: wrong on purpose.
template <typename Table, typename Spoil>
void add_spoiled(Table& table, const std::string& name, Spoil spoil) {
  const auto* ref = table.find("ref");
  REQUIRE(ref != nullptr);
  table.add(VariantPlace::last(), {.name = name,
                                   .supports = ref->supports,
                                   .fn = [fn = ref->fn, spoil](const auto& a) { spoil(fn, a); },
                                   .description = "ref, spoiled: wrong on purpose"});
}

}  // namespace

TEST_CASE("the memory-bound drivers' checks find wrong variants", "[drivers]") {
  register_builtin_kernels();
  using EwFn = std::function<void(const ElementwiseArgs&)>;
  add_spoiled(elementwise_table(), "test.last_off", [](const EwFn& fn, const ElementwiseArgs& a) {
    fn(a);
    static_cast<float*>(a.out.data)[(a.problem.numel - 1) * a.out.strides[0]] += 1.0f;
  });
  CHECK_THAT(check_of("elementwise:n300:mul:strided", "test.last_off"),
             Contains("out: scaled error") && Contains("flat 299"));

  using ReduceFn = std::function<void(const ReduceArgs&)>;
  add_spoiled(reduce_table(), "test.no_scale", [](const ReduceFn& fn, const ReduceArgs& a) {
    ReduceArgs b = a;
    b.scale = 1.0;
    fn(b);
  });
  CHECK_THAT(check_of("reduce:o3r50i2", "test.no_scale"), Contains("sum: scaled error"));

  using SoftmaxFn = std::function<void(const SoftmaxArgs&)>;
  add_spoiled(softmax_table(), "test.no_lse", [](const SoftmaxFn& fn, const SoftmaxArgs& a) {
    const float keep = *static_cast<float*>(a.lse);
    fn(a);
    *static_cast<float*>(a.lse) = keep;  // the first row's lse unwritten
  });
  CHECK_THAT(check_of("softmax:r5c9:cross_entropy_forward", "test.no_lse"),
             Contains("lse: scaled error inf") && Contains("flat 0: got nan"));

  using EmbeddingFn = std::function<void(const EmbeddingArgs&)>;
  add_spoiled(embedding_table(), "test.drifting",
              [calls = std::make_shared<int>(0)](const EmbeddingFn& fn, const EmbeddingArgs& a) {
                fn(a);
                if ((*calls)++ % 2 == 1) static_cast<float*>(a.grad)[0] += 1.0f;  // second runs
              });
  CHECK_THAT(check_of("embedding:v10d4n7:bwd", "test.drifting"),
             Contains("grad: a second run gave other bits"));

  using DropoutFn = std::function<void(const DropoutArgs&)>;
  add_spoiled(dropout_table(), "test.other_stream", [](const DropoutFn& fn, const DropoutArgs& a) {
    a.gen->next();  // one draw skipped: another Philox seed
    fn(a);
  });
  CHECK_THAT(check_of("dropout:n1000:p0.3", "test.other_stream"),
             Contains("mask: differs from ref's bits"));
}
