// SPDX-License-Identifier: Apache-2.0
// conv2d: float64 gradient checks, forcing through the op layer, fused relu, argument errors by
// message, nn::Conv2d, the default selection. Every registered variant against `ref` on the
// shared shape list (small odd cases and real AlexNet / ResNet-50 / VGG16 / cnn_mnist layers) is
// the conv2d driver's loop in tests/test_op_drivers.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/random.h"
#include "engine/core/views.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/nn/conv.h"
#include "engine/ops/conv.h"
#include "helpers/gradcheck.h"
#include "helpers/conv_cases.h"
#include "helpers/variant_harness.h"
#include "kernels/register.h"

using namespace anvil;
using anvil::test::uniform_leaf;
using anvil::test::values_f64;
using Catch::Contains;
using V = std::vector<Tensor>;

namespace {

Conv2dOptions options_of(const test::ConvCase& cc) {
  Conv2dOptions o;
  o.stride = {cc.sh, cc.sw};
  o.padding = {cc.ph, cc.pw};
  o.dilation = {cc.dh, cc.dw};
  o.groups = cc.groups;
  return o;
}

ConvProblem problem_of(const test::ConvCase& cc, ConvPass pass, DType dtype, bool bias, bool relu) {
  return anvil::test::conv_problem_of(cc, pass, dtype, bias, relu);
}

Tensor rand_f32(const Shape& s, Generator& gen) { return uniform(s, -1.0, 1.0, DType::f32, &gen); }

}  // namespace

// ---- problem descriptor ------------------------------------------------------------------------

TEST_CASE("ConvProblem: output size and repr and flops", "[conv]") {
  test::ConvCase cc{"alexnet conv1", 16, 3, 224, 224, 96, 11, 11, 4, 4, 2, 2};
  ConvProblem p = problem_of(cc, ConvPass::forward, DType::f32, true, true);
  CHECK(p.p() == 55);
  CHECK(p.q() == 55);
  CHECK_THAT(p.repr(), Contains("conv2d f32 cpu forward N=16 C=3 H=224 W=224 K=96 R=11 S=11") &&
                           Contains("stride=4x4 pad=2x2") && Contains("bias relu -> P=55 Q=55"));
  CHECK(p.flops() == Approx(2.0 * 16 * 96 * 55 * 55 * 3 * 121 + 16.0 * 96 * 55 * 55));
  ConvProblem q = p;
  q.pass = ConvPass::backward_data;
  CHECK(p.key() != q.key());
  test::ConvCase dil{"dil", 1, 1, 10, 10, 1, 3, 3, 2, 2, 0, 0, 3, 3};
  CHECK(problem_of(dil, ConvPass::forward, DType::f32, false, false).p() == 2);  // (10-7)/2+1
  REQUIRE_NOTHROW(register_builtin_kernels());
  REQUIRE(find_variant_table("conv2d") != nullptr);
  REQUIRE(conv_table().find("ref") != nullptr);
  REQUIRE(conv_table().variants().back().name == "ref");
}

// ---- gradient checks (float64) ----------------------------------------------------------------

TEST_CASE("conv2d gradcheck over stride and padding and dilation and groups", "[conv][gradcheck]") {
  const std::vector<test::ConvCase> cases = {
      {"plain", 2, 3, 5, 6, 4, 3, 2},
      {"stride2 pad1", 2, 3, 7, 6, 4, 3, 3, 2, 2, 1, 1},
      {"dilation2 pad2", 1, 2, 7, 6, 3, 3, 3, 1, 1, 2, 2, 2, 2},
      {"groups2", 2, 4, 5, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2},
      {"depthwise", 1, 3, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3},
      {"pointwise", 2, 3, 4, 3, 2, 1, 1},
      {"mixed", 2, 2, 8, 7, 3, 2, 3, 2, 1, 0, 1, 1, 2},
  };
  register_builtin_kernels();
  std::uint64_t seed = 100;
  for (const auto& cc : cases) {
    const Conv2dOptions o = options_of(cc);
    for (const auto& v : conv_table().variants()) {
      const ConvProblem p = problem_of(cc, ConvPass::forward, DType::f64, true, false);
      const auto s = v.supports ? v.supports(p) : Support::yes();
      if (!s.ok) {
        INFO(v.name << " skipped for f64: " << s.reason);
        CHECK_FALSE(s.reason.empty());
        continue;
      }
      ForceVariant force("conv2d", v.name);
      Tensor x = uniform_leaf({cc.n, cc.c, cc.h, cc.w}, -1, 1, ++seed);
      Tensor w = uniform_leaf({cc.k, cc.c / cc.groups, cc.r, cc.s}, -1, 1, ++seed);
      Tensor b = uniform_leaf({cc.k}, -1, 1, ++seed);
      const std::string label = std::string(cc.name) + " on " + v.name;
      ANVIL_CHECK_GRADCHECK(label, [o](const V& in) { return conv2d(in[0], in[1], in[2], o); },
                            {x, w, b});
      ANVIL_CHECK_GRADCHECK(label + " relu",
                            [o](const V& in) { return conv2d_relu(in[0], in[1], in[2], o); },
                            {x, w, b});
      ANVIL_CHECK_GRADCHECK(label + " no bias",
                            [o](const V& in) { return conv2d(in[0], in[1], Tensor(), o); }, {x, w});
    }
  }
}

TEST_CASE("conv2d gradients reach only the inputs that require grad", "[conv][autograd]") {
  Tensor x = uniform_leaf({2, 3, 5, 5}, -1, 1, 1, false);
  Tensor w = uniform_leaf({4, 3, 3, 3}, -1, 1, 2, false);
  Tensor b = uniform_leaf({4}, -1, 1, 3);
  ANVIL_CHECK_GRADCHECK("bias only", [](const V& in) { return conv2d(in[0], in[1], in[2]); },
                        {x, w, b});
  Tensor x2 = uniform_leaf({2, 3, 5, 5}, -1, 1, 4);
  ANVIL_CHECK_GRADCHECK("input only", [](const V& in) { return conv2d(in[0], in[1]); }, {x2, w});
  {
    NoGradGuard guard;
    Tensor y = conv2d(x2, w, b);
    CHECK_FALSE(y.requires_grad());
  }
  CHECK(conv2d(x2, w, b).requires_grad());
  CHECK_FALSE(conv2d(x, w).requires_grad());
}

// ---- every variant against ref ----------------------------------------------------------------
// The conv2d driver's loop (tests/test_op_drivers.cpp, "op driver loop: conv2d ..."): every
// variant on the odd shapes and the real layers of harness/drivers/conv2d_driver.cpp, all three
// passes, with and without bias and fused relu, against ref in f64.

TEST_CASE("conv2d forcing a variant drives all three passes", "[conv][variants]") {
  register_builtin_kernels();
  Generator gen(7);
  const Conv2dOptions o = options_of({"", 2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1});
  const Tensor x0 = rand_f32({2, 8, 9, 9}, gen), w0 = rand_f32({16, 8, 3, 3}, gen);
  const Tensor b0 = rand_f32({16}, gen);
  auto grads = [&](const std::string& variant) {
    ForceVariant force("conv2d", variant);
    Tensor x = raw::clone(x0).set_requires_grad(), w = raw::clone(w0).set_requires_grad();
    Tensor b = raw::clone(b0).set_requires_grad();
    Tensor y = conv2d_relu(x, w, b, o);
    sum(y * y).backward();
    return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad()};
  };
  const auto want = grads("ref");
  for (const auto& v : conv_table().variants()) {
    const auto cands = conv_table().candidates(problem_of(
        {"", 2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1}, ConvPass::forward, DType::f32, true, true));
    bool all = true;
    for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights}) {
      const auto c = conv_table().candidates(
          problem_of({"", 2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1}, pass, DType::f32, true, false));
      for (const auto& cand : c)
        if (cand.name == v.name && !cand.support.ok) all = false;
    }
    (void)cands;
    if (!all) {
      INFO(v.name << " does not support every pass of this problem");
      CHECK_THROWS_WITH(grads(v.name), Contains(v.name));
      continue;
    }
    const auto got = grads(v.name);
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO(v.name << " output " << i);
      CHECK(anvil::test::max_abs_diff(got[i], want[i]) < 2e-3 * (1.0 + test::max_abs(want[i])));
    }
  }
}

TEST_CASE("conv2d_relu fuses where the variant can and matches conv then relu", "[conv]") {
  register_builtin_kernels();
  Generator gen(9);
  const Tensor x = rand_f32({2, 4, 6, 6}, gen), w = rand_f32({5, 4, 3, 3}, gen),
               b = rand_f32({5}, gen);
  Conv2dOptions params;
  params.padding = {1, 1};
  for (const auto& v : conv_table().variants()) {
    ForceVariant force("conv2d", v.name);
    const ConvProblem p = ops::conv2d_problem(x, w, b, params);
    if (v.supports && !v.supports(p).ok) continue;
    bool fused = false;
    const Tensor y = ops::conv2d_forward(x, w, b, params, true, &fused);
    ConvProblem pf = p;
    pf.fuse_relu = true;
    INFO(v.name);
    CHECK(fused == (!v.supports || v.supports(pf).ok));
    const Tensor unfused = relu(ops::conv2d_forward(x, w, b, params, false));
    CHECK(anvil::test::max_abs_diff(y, unfused) < 1e-5);
  }
}

// ---- argument errors --------------------------------------------------------------------------

TEST_CASE("conv2d rejects bad arguments with clear messages", "[conv][errors]") {
  const Tensor x = Tensor::zeros({2, 3, 8, 8}), w = Tensor::zeros({4, 3, 3, 3});
  CHECK_THROWS_WITH(conv2d(Tensor::zeros({3, 224, 224}), w),
                    Contains("conv2d: expected 4-D input (N,C,H,W), got [3,224,224]"));
  CHECK_THROWS_WITH(conv2d(x, Tensor::zeros({4, 3, 3})),
                    Contains("conv2d: expected 4-D weight (K,C/groups,R,S), got [4,3,3]"));
  CHECK_THROWS_WITH(conv2d(x, Tensor::zeros({4, 2, 3, 3})),
                    Contains("has C=3 channels but weight [4,2,3,3] with groups=1 expects 2"));
  Conv2dOptions g3;
  g3.groups = 3;
  CHECK_THROWS_WITH(conv2d(x, Tensor::zeros({4, 1, 3, 3}), Tensor(), g3),
                    Contains("out channels K=4 are not divisible by groups=3"));
  CHECK_THROWS_WITH(conv2d(x, Tensor::zeros({4, 3, 9, 3})),
                    Contains("kernel 9x3") && Contains("larger than the padded input 8x8"));
  Conv2dOptions dil;
  dil.dilation = {5, 1};
  dil.padding = {1, 1};
  CHECK_THROWS_WITH(conv2d(x, w, Tensor(), dil), Contains("larger than the padded input 10x10"));
  Conv2dOptions s0;
  s0.stride = {0, 1};
  CHECK_THROWS_WITH(conv2d(x, w, Tensor(), s0),
                    Contains("conv2d: stride must be positive, got 0x1"));
  Conv2dOptions d0;
  d0.dilation = {1, 0};
  CHECK_THROWS_WITH(conv2d(x, w, Tensor(), d0),
                    Contains("conv2d: dilation must be positive, got 1x0"));
  Conv2dOptions pneg;
  pneg.padding = {-1, 0};
  CHECK_THROWS_WITH(conv2d(x, w, Tensor(), pneg),
                    Contains("padding must be non-negative, got -1x0"));
  Conv2dOptions gz;
  gz.groups = 0;
  CHECK_THROWS_WITH(conv2d(x, w, Tensor(), gz), Contains("groups must be positive, got 0"));
  CHECK_THROWS_WITH(conv2d(x, Tensor::zeros({4, 3, 3, 3}, DType::f64)),
                    Contains("dtype mismatch: input is f32 but weight is f64"));
  CHECK_THROWS_WITH(conv2d(x, w, Tensor::zeros({5})),
                    Contains("expected bias [4]") && Contains("got [5]"));
  CHECK_THROWS_WITH(conv2d(x, w, Tensor::zeros({4}, DType::f64)), Contains("but bias is f64"));
  CHECK_THROWS_WITH(
      conv2d(Tensor::zeros({2, 3, 8, 8}, DType::i64), Tensor::zeros({4, 3, 3, 3}, DType::i64)),
      Contains("conv2d: expected a float32, float64, bfloat16 or float16 input, got i64"));
  CHECK_THROWS_WITH(conv2d(Tensor(), w), Contains("conv2d"));
  // An empty batch is fine.
  CHECK(conv2d(Tensor::zeros({0, 3, 8, 8}), w).sizes() == Shape({0, 4, 6, 6}));
  // A forced variant that cannot run the problem is an error naming it, never a fallback.
  ForceVariant force("conv2d", "cpu.onednn");
  CHECK_THROWS_WITH(
      conv2d(Tensor::zeros({2, 3, 8, 8}, DType::f64), Tensor::zeros({4, 3, 3, 3}, DType::f64)),
      Contains("cpu.onednn"));
}

// ---- nn::Conv2d ---------------------------------------------------------------------------------

TEST_CASE("nn::Conv2d shapes and flops and init and kernel problems", "[conv][nn]") {
  Generator gen(3);
  Conv2dOptions o;
  o.stride = {2, 2};
  o.padding = {1, 1};
  nn::Conv2d conv(64, 128, {3, 3}, o, true, &gen);
  CHECK(conv.num_parameters() == 128 * 64 * 9 + 128);
  CHECK(conv.output_shape({16, 64, 56, 56}) == Shape({16, 128, 28, 28}));
  CHECK(conv.forward_flops({16, 64, 56, 56}) ==
        Approx(2.0 * 16 * 128 * 28 * 28 * 64 * 9 + 16.0 * 128 * 28 * 28));
  const double bound = 1.0 / std::sqrt(64.0 * 9.0);
  CHECK(test::max_abs(conv.weight()) <= bound);
  CHECK(test::max_abs(conv.weight()) > 0.9 * bound);
  CHECK(test::max_abs(conv.bias()) <= bound);
  CHECK_THAT(conv.extra_repr(), Contains("in=64, out=128, kernel=3x3, stride=2x2, padding=1x1"));
  std::vector<nn::NamedProblem> probs;
  conv.problems({16, 64, 56, 56}, "resnet50:layer3.0.conv2.", probs);
  REQUIRE(probs.size() == 1);
  CHECK(probs[0].name == "resnet50:layer3.0.conv2");
  const auto& p = std::get<ConvProblem>(probs[0].problem);
  CHECK(p.pass == ConvPass::forward);
  CHECK(p.n == 16);
  CHECK(p.p() == 28);
  CHECK(p.has_bias);
  CHECK_THROWS_WITH(conv.output_shape({16, 32, 56, 56}), Contains("Conv2d") && Contains("C=32"));

  Tensor x = uniform({2, 64, 9, 9}, -1, 1, DType::f32, &gen);
  const Tensor y = conv.forward(x);
  CHECK(y.sizes() == Shape({2, 128, 5, 5}));
  conv.set_fused_relu(true);
  CHECK(anvil::test::max_abs_diff(conv.forward(x), relu(y)) < 1e-5);
  nn::Conv2d grouped(8, 4, {1, 3}, Conv2dOptions{{1, 1}, {0, 1}, {1, 1}, 2}, false, &gen);
  CHECK(grouped.num_parameters() == 4 * 4 * 3);
  CHECK(grouped.output_shape({1, 8, 5, 5}) == Shape({1, 4, 5, 5}));
}

TEST_CASE("conv2d default selection follows the heuristic", "[conv][variants]") {
  register_builtin_kernels();
  const test::ConvCase stem{"stem", 16, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3};
  // The op layer selects on the plain problem and fuses the relu only where the variant can
  // (engine/ops/conv.cpp); oneDNN's relu post-op would drop NaN (Note [NaN propagation]).
  CHECK(conv_table().select(problem_of(stem, ConvPass::forward, DType::f32, true, false)).name ==
        "cpu.onednn");
  const Support fused = conv_table()
                            .find("cpu.onednn")
                            ->supports(problem_of(stem, ConvPass::forward, DType::f32, true, true));
  CHECK_FALSE(fused.ok);
  CHECK_THAT(fused.reason, Contains("NaN"));
  CHECK(conv_table()
            .select(problem_of(stem, ConvPass::backward_data, DType::f32, true, false))
            .name == "cpu.onednn.nchw");
  const test::ConvCase five{"alexnet conv2", 16, 64, 27, 27, 192, 5, 5, 1, 1, 2, 2};
  CHECK(conv_table().select(problem_of(five, ConvPass::forward, DType::f32, true, false)).name ==
        "cpu.onednn");
  const test::ConvCase one{"resnet 1x1", 16, 64, 56, 56, 256, 1, 1};
  for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights})
    CHECK(conv_table().select(problem_of(one, pass, DType::f32, true, false)).name ==
          "cpu.onednn.nchw");
  // A first layer with a 3x3 filter (VGG16's) takes the first-layer rule, not winograd.
  const test::ConvCase vgg_first{"vgg16 features.0", 16, 3, 224, 224, 64, 3, 3, 1, 1, 1, 1};
  CHECK(
      conv_table().select(problem_of(vgg_first, ConvPass::forward, DType::f32, true, false)).name ==
      "cpu.onednn");
  const test::ConvCase three{"resnet 3x3", 16, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1};
  for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights}) {
    const ConvProblem p = problem_of(three, pass, DType::f32, true, false);
    const auto* wino = conv_table().find("cpu.onednn.winograd");
    REQUIRE(wino != nullptr);
    const Support s = wino->supports(p);
    INFO(p.repr() << ": winograd " << (s.ok ? "supported" : s.reason));
    CHECK(conv_table().select(p).name == (s.ok ? "cpu.onednn.winograd" : "cpu.onednn"));
  }
  // f64 never goes to oneDNN: cpu.im2col (over the f64 gemm table) is the first that supports it.
  CHECK(conv_table().select(problem_of(three, ConvPass::forward, DType::f64, true, false)).name ==
        "cpu.im2col");
}
