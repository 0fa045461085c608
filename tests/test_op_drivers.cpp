// SPDX-License-Identifier: Apache-2.0
// The op drivers (harness/op_driver.h, Note [Op drivers]) on the CPU: every table has a driver,
// each driver's problem groups and a sample of the models' real layer problems through the loop
// driver x variant x problem x pass against `ref`
// (tests/helpers/driver_loop.h), and the problem sources (model, group, descriptor). The GPU
// loop is tests/cuda/test_cuda_op_drivers.cpp; checks that fail on wrong variants are
// tests/test_op_driver_faults.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>

#include "engine/core/config.h"
#include "engine/dispatch/variant_table.h"
#include "harness/op_driver.h"
#include "harness/problem_descriptor.h"
#include "helpers/driver_loop.h"
#include "kernels/cpu/bf16/gemm_half.h"
#include "kernels/register.h"

using namespace anvil;
using Catch::Contains;

namespace {

// The ops whose loop has a test case below: every table's.
const std::set<std::string> kLoopedOps = {
    "gemm",       "conv2d",      "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "batch_norm2d",
    "lstm",       "elementwise", "reduce",     "softmax",    "embedding",           "dropout",
    "sgd_update", "adam_update", "grad_norm",  "grad_scale"};

const harness::OpDriver& driver(const std::string& op) {
  register_builtin_kernels();
  const harness::OpDriver* d = harness::find_driver(op);
  REQUIRE(d != nullptr);
  return *d;
}

// Every group of `op`'s driver on the CPU.
void loop_groups(const std::string& op, bool run_ref = true) {
  const auto& d = driver(op);
  for (const auto& group : d.groups()) {
    INFO(op << " group " << group);
    CHECK(test::run_driver_group(d, group, Device::cpu(), run_ref) > 0);
  }
}

}  // namespace

TEST_CASE("every variant table has an op driver", "[drivers]") {
  register_builtin_kernels();
  int tables = 0;
  for (const VariantTableBase* t : variant_tables()) {
    ++tables;
    INFO("table " << t->op());
    CHECK(harness::find_driver(t->op()) != nullptr);
  }
  CHECK(tables >= 16);
  CHECK(static_cast<int>(harness::drivers().size()) == tables);
  for (const harness::OpDriver* d : harness::drivers()) {
    INFO("driver " << d->op());
    CHECK(find_variant_table(d->op()) == &d->table());
    CHECK(kLoopedOps.count(d->op()) == 1);  // its loop runs below
    CHECK_FALSE(d->groups().empty());
  }
  CHECK(harness::drivers().size() == kLoopedOps.size());
}

TEST_CASE("op driver loop: gemm", "[drivers][gemm][variants]") { loop_groups("gemm"); }

// The odd shapes with ref in f32 against ref in f64; the real layers only for the other variants
// (ref on them costs minutes).
TEST_CASE("op driver loop: conv2d odd shapes", "[drivers][conv][variants]") {
  test::run_driver_group(driver("conv2d"), "odd", Device::cpu());
}
TEST_CASE("op driver loop: conv2d layers", "[drivers][conv][variants]") {
  test::run_driver_group(driver("conv2d"), "layers", Device::cpu(), /*run_ref=*/false);
}

// The 16-bit variants (cpu.onednn.bf16 where the CPU has avx512_bf16, cpu.bf16_via_f32,
// cpu.f16_via_f32) on the odd shapes and three layers in bf16 and f16, against ref in f64 on the
// same rounded inputs (Note [Half conv tolerance]); then the bf16 fallback again with the CPU's
// avx512_bf16 masked, as on a CPU without it.
TEST_CASE("op driver loop: conv2d in bf16 and f16", "[drivers][conv][variants][bf16]") {
  const auto& conv = driver("conv2d");
  CHECK(test::run_driver_group(conv, "half", Device::cpu()) > 0);
  CHECK(conv.tolerance("cpu.onednn.bf16", DType::bf16) == 2.0 / 256);
  CHECK(conv.tolerance("cpu.f16_via_f32", DType::f16) == 2.0 / 2048);
  const auto problems = conv.group("half");
  const OpProblem first_bf16 = problems.front().problem;
  REQUIRE(std::get<ConvProblem>(first_bf16).dtype == DType::bf16);
  const auto supported = [&](const std::string& name) {
    for (const auto& c : conv.candidates(first_bf16))
      if (c.name == name) return c.support.ok;
    return false;
  };
  CHECK(supported("cpu.bf16_via_f32"));
  CHECK(supported("cpu.onednn.bf16") == kernels::gemm_bf16_native_available());
  kernels::set_gemm_bf16_mask_native(true);
  const bool native_masked = !supported("cpu.onednn.bf16");
  kernels::set_gemm_bf16_mask_native(false);
  CHECK(native_masked);
}

TEST_CASE("op driver loop: max_pool2d", "[drivers][pool][variants]") { loop_groups("max_pool2d"); }
TEST_CASE("op driver loop: avg_pool2d", "[drivers][pool][variants]") { loop_groups("avg_pool2d"); }
TEST_CASE("op driver loop: adaptive_avg_pool2d", "[drivers][pool][variants]") {
  loop_groups("adaptive_avg_pool2d");
}
TEST_CASE("op driver loop: batch_norm2d", "[drivers][batch_norm][variants]") {
  loop_groups("batch_norm2d");
}
TEST_CASE("op driver loop: lstm", "[drivers][lstm][variants]") { loop_groups("lstm"); }
// The row-split recurrence (Note [Batch-row-parallel recurrence]) and cpu.fused.packed's shared
// packed weight (Note [Prepacked recurrent weight]) depend on the thread count: the loop once
// more at exactly 1 and 2 threads (the "odd" group's batch of 128 splits into two row blocks).
TEST_CASE("op driver loop: lstm at 1 and 2 threads", "[drivers][lstm][variants][threads]") {
  const int saved = get_num_threads();
  for (int threads : {1, 2}) {
    INFO(threads << " threads");
    set_num_threads(threads);
    loop_groups("lstm");
  }
  set_num_threads(saved);
}
TEST_CASE("op driver loop: elementwise", "[drivers][elementwise][variants]") {
  loop_groups("elementwise");
}
TEST_CASE("op driver loop: reduce", "[drivers][reduce][variants]") { loop_groups("reduce"); }
TEST_CASE("op driver loop: softmax", "[drivers][softmax][variants]") { loop_groups("softmax"); }
// ref is the oracle, bit for bit (harness/drivers/embedding_driver.cpp): each CPU variant runs
// every problem, ref too (against itself, twice: its own determinism).
TEST_CASE("op driver loop: embedding", "[drivers][embedding][variants]") {
  loop_groups("embedding");
}
TEST_CASE("op driver loop: dropout", "[drivers][dropout][variants]") { loop_groups("dropout"); }
TEST_CASE("op driver loop: the optimizer tables", "[drivers][optim][variants]") {
  for (const char* op : {"sgd_update", "adam_update", "grad_norm", "grad_scale"}) {
    INFO(op);
    loop_groups(op);
  }
}

TEST_CASE("op driver loop: the models' real layer problems", "[drivers][models][variants]") {
  struct Sample {
    const char* op;
    const char* model;
    std::int64_t batch;
    std::size_t at_most;  // problems taken, in forward order
  };
  // Small batches: ref runs in f64 on every problem.
  const Sample samples[] = {{"gemm", "cnn_mnist", 2, 6},
                            {"conv2d", "cnn_cifar", 2, 4},
                            {"max_pool2d", "cnn_cifar", 2, 2},
                            {"batch_norm2d", "resnet50", 1, 3},
                            {"adaptive_avg_pool2d", "resnet50", 1, 1},
                            {"lstm", "lstm32", 2, 1}};
  std::uint64_t seed = 500;
  for (const auto& s : samples) {
    auto problems = harness::model_problems(driver(s.op), s.model, s.batch);
    INFO(s.op << " problems of " << s.model);
    REQUIRE(!problems.empty());
    problems.resize(std::min(problems.size(), s.at_most));
    test::DriverLoopOptions o;
    o.run_ref = false;  // ref is the oracle
    o.seed = seed += 100;
    CHECK(test::run_driver_loop(driver(s.op), problems, Device::cpu(), o) >=
          static_cast<int>(problems.size()));
  }
}

TEST_CASE("op drivers read problems from a model, a group or a descriptor", "[drivers]") {
  const auto& conv = driver("conv2d");
  const auto from_model = harness::problems_from(conv, "model:cnn_mnist");
  REQUIRE(from_model.size() == 2);  // conv32, conv64
  CHECK(from_model[0].name.rfind("cnn_mnist:", 0) == 0);
  CHECK(harness::problems_from(conv, "group:odd").size() == conv.group("odd").size());
  const auto one = harness::problems_from(conv, "mb2ic3ih5oc4kh3");
  REQUIRE(one.size() == 1);
  CHECK(std::get<ConvProblem>(one[0].problem).c == 3);
  CHECK_THROWS_WITH(harness::problems_from(conv, "group:huge"),
                    Contains("no problem group 'huge'") && Contains("odd, layers or half"));
  CHECK_THROWS_WITH(harness::problems_from(conv, "mb2ic3ih5oc4"), Contains("missing 'kh'"));
  const auto sm = harness::problems_from(driver("softmax"), "r3c7:log_softmax:f64");
  REQUIRE(sm.size() == 1);
  CHECK(std::get<SoftmaxProblem>(sm[0].problem).op == SoftmaxOp::log_softmax);
  CHECK(harness::problems_from(driver("grad_norm"), "group:lists").size() ==
        driver("grad_norm").group("lists").size());
  // No model layer lists a memory-bound problem (nn::Module::problems()).
  CHECK(harness::problems_from(driver("softmax"), "model:cnn_mnist").empty());
  // Duplicates of a model are listed once (resnet50 repeats its bottleneck problems).
  const auto bn = harness::model_problems(driver("batch_norm2d"), "resnet50", 1);
  std::set<std::string> seen;
  for (const auto& np : bn)
    seen.insert(std::visit([](const auto& q) { return q.key(); }, np.problem));
  CHECK(seen.size() == bn.size());
}

TEST_CASE("op drivers count FLOPs and bytes from the problem", "[drivers]") {
  const auto& gemm = driver("gemm");
  const OpProblem p = GemmProblem::dense(4, 5, 6, false, false);
  CHECK(gemm.flops(p) == 2.0 * 4 * 5 * 6);
  CHECK(gemm.bytes(p) == std::get<GemmProblem>(p).bytes());
  CHECK(gemm.tolerance("cuda.cublas.tf32", DType::f32) > gemm.tolerance("cuda.cublas", DType::f32));
  CHECK(gemm.tolerance("cpu.blocked", DType::f64) < gemm.tolerance("cpu.blocked", DType::f32));
  // The memory-bound tables: their drivers count.
  const OpProblem add = harness::parse_op_problem("elementwise:n10:add");
  CHECK(driver("elementwise").flops(add) == 10.0);
  CHECK(driver("elementwise").bytes(add) == 3.0 * 10 * 4);
  const OpProblem max = harness::parse_op_problem("reduce:o2r5i3:max:f64");
  CHECK(driver("reduce").flops(max) == 30.0);
  CHECK(driver("reduce").bytes(max) == 30.0 * 8 + 6.0 * (8 + 8));
  const OpProblem ce = harness::parse_op_problem("softmax:r4c10:cross_entropy_forward:i32");
  CHECK(driver("softmax").bytes(ce) == 40.0 * 4 + 4 * 4 + 2.0 * 4 * 4);
  CHECK(driver("embedding").flops(harness::parse_op_problem("embedding:v5d3n7")) == 0.0);
  CHECK(driver("embedding").flops(harness::parse_op_problem("embedding:v5d3n7:bwd")) == 21.0);
  CHECK(driver("dropout").bytes(harness::parse_op_problem("dropout:n8:f64")) == 3.0 * 8 * 8);
  const OpProblem sgd = harness::parse_op_problem("sgd_update:t3n100:momentum");
  CHECK(driver("sgd_update").flops(sgd) == 400.0);
  CHECK(driver("sgd_update").bytes(sgd) == std::get<OptimizerProblem>(sgd).bytes());
  // A driver asked about a problem type it does not count refuses.
  CHECK_THROWS_WITH(driver("gemm").flops(add), Contains("does not count the FLOPs"));
}
