// SPDX-License-Identifier: Apache-2.0
// The GPU pooling and batch-norm variants' pure logic, on the CPU (no GPU, no CUDA library
// loaded): which problems cuda.custom and cuda.cudnn run, the reasons when they decline, and the
// cuDNN pooling descriptor parameters (kernels/cuda/pool_bn_plan.h), on hand-made problems and on
// the real layer problems of the CNNs (models::problems).
#include <catch2/catch.hpp>

#include <variant>
#include <map>
#include <string>

#include "engine/dispatch/batch_norm_problem.h"
#include "engine/dispatch/pool_problem.h"
#include "kernels/cuda/pool_bn_plan.h"
#include "models/registry.h"

using namespace anvil;
using namespace anvil::cuda;

namespace {

const Device kGpu = Device::cuda(0);

PoolProblem pool(PoolKind kind, const Shape& x, std::int64_t k, std::int64_t s, std::int64_t p,
                 bool ceil = false, bool include_pad = true, DType dt = DType::f32) {
  return make_pool_problem(kind, x, {k, k}, {s, s}, {p, p}, ceil, include_pad, dt, kGpu, "test");
}

}  // namespace

TEST_CASE("cuda.cudnn pooling: descriptor parameters", "[cuda_plan][pool]") {
  SECTION("max, inference: CUDNN_POOLING_MAX_DETERMINISTIC with the problem's window") {
    const PoolProblem p = pool(PoolKind::max, {2, 64, 112, 112}, 3, 2, 1);
    const CudnnPoolPlan plan = cudnn_pool_plan(p);
    REQUIRE(plan.support.ok);
    CHECK(plan.mode == CudnnPoolMode::max_deterministic);
    CHECK(std::string(cudnn_pool_mode_name(plan.mode)) == "CUDNN_POOLING_MAX_DETERMINISTIC");
    CHECK((plan.window_h == 3 && plan.window_w == 3 && plan.stride_h == 2 && plan.stride_w == 2 &&
           plan.pad_h == 1 && plan.pad_w == 1));
    CHECK((plan.n == 2 && plan.c == 64 && plan.h == 112 && plan.w == 112 && plan.oh == 56 &&
           plan.ow == 56));
  }
  SECTION("average: the padding mode follows count_include_pad; rectangular windows") {
    PoolProblem p = make_pool_problem(PoolKind::avg, {1, 3, 9, 7}, {3, 2}, {2, 1}, {1, 0}, false,
                                      true, DType::f64, kGpu, "test");
    CudnnPoolPlan plan = cudnn_pool_plan(p);
    REQUIRE(plan.support.ok);
    CHECK(plan.mode == CudnnPoolMode::avg_include_padding);
    CHECK((plan.window_h == 3 && plan.window_w == 2 && plan.stride_h == 2 && plan.stride_w == 1 &&
           plan.pad_h == 1 && plan.pad_w == 0));
    CHECK((plan.oh == 5 && plan.ow == 6));
    p.count_include_pad = false;
    plan = cudnn_pool_plan(p.with_pass(PoolPass::backward));
    REQUIRE(plan.support.ok);
    CHECK(plan.mode == CudnnPoolMode::avg_exclude_padding);
    CHECK(std::string(cudnn_pool_mode_name(plan.mode)) ==
          "CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING");
  }
  SECTION("adaptive with uniform bins: window = stride = H/OH x W/OW, no padding") {
    PoolProblem g =
        make_adaptive_pool_problem({2, 2048, 7, 7}, {1, 1}, DType::f32, kGpu, "test");  // global
    CudnnPoolPlan plan = cudnn_pool_plan(g);
    REQUIRE(plan.support.ok);
    CHECK((plan.window_h == 7 && plan.window_w == 7 && plan.stride_h == 7 && plan.stride_w == 7 &&
           plan.pad_h == 0 && plan.pad_w == 0 && plan.oh == 1 && plan.ow == 1));
    plan =
        cudnn_pool_plan(make_adaptive_pool_problem({2, 3, 10, 8}, {5, 4}, DType::f64, kGpu, "test")
                            .with_pass(PoolPass::backward));
    REQUIRE(plan.support.ok);
    CHECK((plan.window_h == 2 && plan.window_w == 2 && plan.stride_h == 2 && plan.stride_w == 2));
    // vgg16's 7x7 -> 7x7: a 1x1 window.
    plan = cudnn_pool_plan(
        make_adaptive_pool_problem({2, 512, 7, 7}, {7, 7}, DType::f32, kGpu, "test"));
    REQUIRE(plan.support.ok);
    CHECK((plan.window_h == 1 && plan.stride_w == 1));
  }
  SECTION("ceil_mode that does not change the output size runs") {
    const PoolProblem p = pool(PoolKind::max, {2, 256, 13, 13}, 3, 2, 0, true);  // 6 either way
    CHECK(p.oh == 6);
    CHECK(cudnn_pool_plan(p).support.ok);
  }
}

TEST_CASE("cuda.cudnn pooling: what it declines and why", "[cuda_plan][pool]") {
  const PoolProblem max = pool(PoolKind::max, {2, 3, 8, 8}, 2, 2, 0);
  for (PoolPass pass : {PoolPass::forward_training, PoolPass::backward}) {
    const Support s = cudnn_pool_plan(max.with_pass(pass)).support;
    CHECK_FALSE(s.ok);
    CHECK_THAT(s.reason, Catch::Contains("first-maximum index") &&
                             Catch::Contains("cudnnPoolingBackward") &&
                             Catch::Contains("inference only"));
  }
  // ceil_mode adding a row: 7 rows, k3 s2 p1: floor 4, ceil 4 -> same; 8 rows, k2 s2 p0 + 1 col.
  const PoolProblem ceil = pool(PoolKind::avg, {1, 2, 7, 9}, 2, 2, 0, true);
  CHECK(ceil.oh == 4);
  CHECK(ceil.ow == 5);
  const Support sc = cudnn_pool_plan(ceil).support;
  CHECK_FALSE(sc.ok);
  CHECK_THAT(sc.reason, Catch::Contains("ceil_mode gives 4x5") &&
                            Catch::Contains("floor rule gives 3x4") &&
                            Catch::Contains("no ceil mode"));
  for (auto [in, out] : {std::pair<Shape, std::array<std::int64_t, 2>>{{2, 3, 7, 9}, {3, 4}},
                         {{1, 512, 1, 1}, {7, 7}}}) {
    const Support s =
        cudnn_pool_plan(make_adaptive_pool_problem(in, out, DType::f32, kGpu, "test")).support;
    CHECK_FALSE(s.ok);
    CHECK_THAT(s.reason, Catch::Contains("differ in size") && Catch::Contains("one stride"));
  }
  // More than 2^31-1 elements (int descriptors); the problem is only described, never allocated.
  const Support big = cudnn_pool_plan(pool(PoolKind::avg, {64, 1024, 256, 256}, 2, 2, 0)).support;
  CHECK_FALSE(big.ok);
  CHECK_THAT(big.reason, Catch::Contains("int extents") && Catch::Contains("4294967296"));
}

TEST_CASE("cuda.custom pooling runs every kind, pass and ceil mode", "[cuda_plan][pool]") {
  for (PoolPass pass :
       {PoolPass::forward_inference, PoolPass::forward_training, PoolPass::backward}) {
    CHECK(custom_pool_support(pool(PoolKind::max, {2, 3, 7, 9}, 3, 2, 1, true).with_pass(pass)).ok);
    CHECK(custom_pool_support(
              pool(PoolKind::avg, {2, 3, 7, 9}, 3, 2, 1, true, false, DType::f64).with_pass(pass))
              .ok);
    CHECK(custom_pool_support(
              make_adaptive_pool_problem({1, 2, 2, 3}, {5, 7}, DType::f32, kGpu, "test")
                  .with_pass(pass))
              .ok);
  }
  // The int32 index of a max window cannot address a plane of 2^31 elements or more.
  const Support s = custom_pool_support(pool(PoolKind::max, {1, 1, 65536, 65536}, 2, 2, 0));
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.reason, Catch::Contains("int32 max index"));
  CHECK(custom_pool_support(pool(PoolKind::avg, {1, 1, 65536, 65536}, 2, 2, 0)).ok);
}

TEST_CASE("cuda batch norm: what each variant runs and declines", "[cuda_plan][batch_norm]") {
  for (DType dt : {DType::f32, DType::f64}) {
    const BatchNormProblem train =
        make_batch_norm_problem({2, 3, 5, 7}, true, 0.1, 1e-5, dt, kGpu, "test");
    const BatchNormProblem eval =
        make_batch_norm_problem({2, 3, 5, 7}, false, 0.1, 1e-5, dt, kGpu, "test");
    for (const BatchNormProblem& p : {train, eval, train.with_pass(BatchNormPass::backward)}) {
      INFO(p.repr());
      CHECK(cudnn_batch_norm_support(p).ok);
      CHECK(custom_batch_norm_support(p).ok);
    }
    // Eval-mode backward: the statistics are constants; cuDNN differentiates through them.
    BatchNormProblem eval_bwd = eval.with_pass(BatchNormPass::backward);
    CHECK_FALSE(eval_bwd.batch_stats);
    const Support s = cudnn_batch_norm_support(eval_bwd);
    CHECK_FALSE(s.ok);
    CHECK_THAT(s.reason, Catch::Contains("eval-mode backward") &&
                             Catch::Contains("cudnnBatchNormalizationBackward"));
    CHECK(custom_batch_norm_support(eval_bwd).ok);
  }
  // (M - 1) / M turns cuDNN's unbiased variance into the biased one: M = 2*5*7 = 70.
  const BatchNormProblem p =
      make_batch_norm_problem({2, 3, 5, 7}, true, 0.1, 1e-5, DType::f32, kGpu, "test");
  CHECK(cudnn_biased_variance_factor(p) == Approx(69.0 / 70.0).epsilon(1e-15));
  // A hand-built training problem with one value per channel (the op layer refuses it earlier).
  BatchNormProblem one = p;
  one.n = 1;
  one.h = 1;
  one.w = 1;
  CHECK_THAT(cudnn_batch_norm_support(one).reason, Catch::Contains("at least 2 values"));
  BatchNormProblem ints = p;
  ints.dtype = DType::i32;
  CHECK_THAT(cudnn_batch_norm_support(ints).reason, Catch::Contains("needs f32 or f64, got i32"));
  CHECK_THAT(custom_batch_norm_support(ints).reason, Catch::Contains("needs f32 or f64, got i32"));
}

// How many of the CNNs' real pooling and batch-norm problems each GPU variant runs, per pass.
// These counts are the floors that tests/cuda/test_cuda_pool_bn.cpp states for the GPU run.
TEST_CASE("cuda variants on the CNNs' real layer problems", "[cuda_plan][models]") {
  std::map<std::string, int> ran, declined;
  for (const std::string model : {"alexnet", "vgg16", "resnet50", "cnn_mnist", "cnn_cifar"}) {
    for (const auto& np : models::problems(model, 8)) {
      const std::string op = op_name(np.problem);
      if (const auto* bn = std::get_if<BatchNormProblem>(&np.problem)) {
        BatchNormProblem p = *bn;
        p.device = kGpu;
        for (BatchNormPass pass : {BatchNormPass::forward_training,
                                   BatchNormPass::forward_inference, BatchNormPass::backward}) {
          const BatchNormProblem q = p.with_pass(pass);  // backward: batch statistics
          ++(cudnn_batch_norm_support(q).ok ? ran : declined)["bn cudnn"];
          ++(custom_batch_norm_support(q).ok ? ran : declined)["bn custom"];
        }
      } else if (const auto* pool = std::get_if<PoolProblem>(&np.problem)) {
        PoolProblem p = *pool;
        p.device = kGpu;
        for (PoolPass pass :
             {PoolPass::forward_inference, PoolPass::forward_training, PoolPass::backward}) {
          const PoolProblem q = p.with_pass(pass);
          INFO(np.name << ": " << q.repr());
          ++(cudnn_pool_plan(q).support.ok ? ran : declined)["pool cudnn " + op];
          ++(custom_pool_support(q).ok ? ran : declined)["pool custom " + op];
        }
      }
    }
  }
  std::string counts;
  for (const auto& [k, v] : ran) counts += k + " runs " + std::to_string(v) + "; ";
  for (const auto& [k, v] : declined) counts += k + " declines " + std::to_string(v) + "; ";
  WARN(counts);
  // cuda.custom declines none of them.
  CHECK(declined["pool custom max_pool2d"] == 0);
  CHECK(declined["pool custom adaptive_avg_pool2d"] == 0);
  CHECK(declined["bn custom"] == 0);
  // cuda.cudnn: every max pool at inference (one pass of three), every BN problem, and the
  // uniform adaptive pools (resnet50's global average, vgg16's 7x7 -> 7x7 at 224x224 input).
  CHECK(ran["pool cudnn max_pool2d"] * 3 == ran["pool custom max_pool2d"]);
  CHECK(ran["pool cudnn max_pool2d"] >= 12);  // the 12 max-pool layers of the five CNNs
  CHECK(ran["pool cudnn adaptive_avg_pool2d"] >= 6);
  CHECK(declined["bn cudnn"] == 0);
  CHECK(ran["bn cudnn"] >= 3 * 53);  // resnet50's 53 batch-norm layers, three passes each
}
