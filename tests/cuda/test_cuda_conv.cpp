// SPDX-License-Identifier: Apache-2.0
// conv2d on the GPU: every CUDA variant of the conv2d table (cuda.cudnn, cuda.cudnn.tf32 forced,
// each cuda.cudnn.<family>, cuda.custom.im2col) against the CPU `ref` in f64 on odd shapes and on
// the conv layers of AlexNet, ResNet-50, VGG16, cnn_mnist and cnn_cifar (models::problems,
// batch 1, spatial size cropped to at most 24 so that ref stays fast (about 65 s of f64 ref on 2
// cores); channels, kernel, stride, padding kept), all three passes, f32 with and without bias and
// fused ReLU, and f64 where cuDNN offers it. Every variant must run at least kMinRuns
// problem-passes (a variant that declines everything fails). A float64 gradient check of conv2d run
// on the GPU, the default's choice named in its label, and a small conv net trained on the GPU
// against the CPU. Runs only with a GPU (gpu_main.cpp reports the binary skipped otherwise).
#include <catch2/catch.hpp>

#include <algorithm>
#include <variant>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <vector>

#include "engine/autograd/functions.h"
#include "engine/core/cuda_backend.h"
#include "engine/core/random.h"
#include "engine/core/views.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/nn/conv.h"
#include "engine/nn/layers.h"
#include "engine/optim/optimizer.h"
#include "harness/problem_descriptor.h"
#include "harness/op_driver.h"
#include "helpers/driver_loop.h"
#include "helpers/gradcheck.h"
#include "helpers/variant_harness.h"
#include "kernels/cudnn_conv_plan.h"
#include "kernels/register.h"
#include "models/registry.h"

using namespace anvil;
using anvil::test::uniform_leaf;
using anvil::test::values_f64;

namespace {
const Device kGpu = Device::cuda(0);
constexpr int kMinRuns = 3;  // problem-passes every CUDA conv2d variant must run

void setup() {
  require_cuda("test_cuda_conv");
  register_builtin_kernels();
}

// The odd shapes of the conv2d driver (harness/drivers/conv2d_driver.cpp) in `dtype`: each
// without and with bias and a fused relu; the loop moves them to the GPU.
std::vector<nn::NamedProblem> small_problems(DType dtype) {
  auto v = harness::find_driver("conv2d")->group("odd");
  for (auto& np : v) std::get<ConvProblem>(np.problem).dtype = dtype;
  return v;
}

// The distinct conv layers of the CNNs at batch 1, cropped to H, W <= 24 (padding kept, and
// the input never smaller than the dilated filter).
std::vector<ConvProblem> layer_problems() {
  std::vector<ConvProblem> out;
  std::set<std::string> seen;
  for (const char* model : {"alexnet", "resnet50", "vgg16", "cnn_mnist", "cnn_cifar"}) {
    for (const auto& nk : models::problems(model, 1)) {
      const auto* conv = std::get_if<ConvProblem>(&nk.problem);
      if (!conv) continue;
      ConvProblem p = *conv;
      p.pass = ConvPass::forward;
      p.fuse_relu = false;
      p.h = std::max(std::min<std::int64_t>(p.h, 24), p.dil_h * (p.r - 1) + 1);
      p.w = std::max(std::min<std::int64_t>(p.w, 24), p.dil_w * (p.s - 1) + 1);
      if (seen.insert(p.key()).second) out.push_back(p);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("the CUDA conv2d variants are registered", "[cuda][conv]") {
  setup();
  for (const char* name : {"cuda.cudnn", "cuda.cudnn.tf32", "cuda.cudnn.implicit_gemm",
                           "cuda.cudnn.implicit_precomp_gemm", "cuda.cudnn.gemm", "cuda.cudnn.fft",
                           "cuda.cudnn.fft_tiling", "cuda.cudnn.winograd",
                           "cuda.cudnn.winograd_nonfused", "cuda.custom.im2col"}) {
    INFO(name);
    CHECK(conv_table().find(name) != nullptr);
  }
  auto p = std::get<ConvProblem>(harness::parse_op_problem("conv2d:mb2ic3ih8oc4kh3ph1:cuda"));
  CHECK(conv_table().select(p).name == "cuda.cudnn");  // the default; TF32 never by default
  CHECK_FALSE(conv_table().find("cuda.cudnn.tf32")->supports == nullptr);
  CHECK(conv_table().find("cuda.cudnn.tf32")->opt_in);
}

// The variants' functions are called directly by the conv2d driver, so the opt-in TF32
// variant runs too; its bound and those of Winograd, FFT and the default (which may pick either)
// are the driver's tolerance().
TEST_CASE("CUDA conv2d variants match ref on odd shapes, f32 and f64", "[cuda][conv]") {
  setup();
  const harness::OpDriver& conv = *harness::find_driver("conv2d");
  test::DriverLoopOptions o;
  o.minimum = kMinRuns;
  test::run_driver_loop(conv, small_problems(DType::f32), kGpu, o);
  // f64: cuDNN supports only some algorithms; counted, not required, but for the default.
  std::map<std::string, int> ran;
  o.minimum = 0;
  o.seed = 1000;
  test::run_driver_loop(conv, small_problems(DType::f64), kGpu, o, &ran);
  CHECK(ran["cuda.cudnn"] >= kMinRuns);
}

TEST_CASE("CUDA conv2d variants match ref on the CNNs' conv layers", "[cuda][conv]") {
  setup();
  std::vector<nn::NamedProblem> layers;
  for (ConvProblem p : layer_problems()) {
    p.has_bias = true;
    layers.push_back({p.repr(), p});
  }
  REQUIRE(layers.size() >= 10);
  test::DriverLoopOptions o;
  o.minimum = kMinRuns;
  o.seed = 2000;
  test::run_driver_loop(*harness::find_driver("conv2d"), layers, kGpu, o);
}

TEST_CASE("cuda.cudnn names the algorithm it chose and caches it", "[cuda][conv]") {
  setup();
  kernels::cudnn_clear_choices();
  Generator gen(7);
  const Tensor x = uniform({4, 8, 16, 16}, -1, 1, DType::f32, &gen).to(kGpu);
  const Tensor w = uniform({16, 8, 3, 3}, -1, 1, DType::f32, &gen).to(kGpu);
  Conv2dOptions o;
  o.padding = {1, 1};
  const Tensor y1 = conv2d(x, w, Tensor(), o);
  const auto choices = kernels::cudnn_choices();
  REQUIRE(choices.size() == 1);
  INFO(choices[0].problem << " -> " << choices[0].algo_name << "; " << choices[0].candidates);
  CHECK(choices[0].algo_name.rfind("CUDNN_CONVOLUTION_FWD_ALGO_", 0) == 0);
  CHECK(choices[0].descriptors != nullptr);     // cached beside the choice
  const Tensor y2 = conv2d(x, w, Tensor(), o);  // cached: no second search
  CHECK(kernels::cudnn_choices().size() == 1);
  CHECK(test::max_abs_diff(y1.to(Device::cpu()), y2.to(Device::cpu())) == 0.0);
}

namespace {

// Runs `variant` of the conv2d table directly on constant operands: x (and dy) = w = v with
// v = 1 + 3 * 2^-13, which TF32 (10 mantissa bits, spacing 2^-10 at 1) rounds to 1. With stride 1
// and no padding every result is (number of terms) * v^2 (Note [cuDNN math type of the timed
// algorithm]): an IEEE FP32 kernel lands within a few 1e-7 of it (the sums are positive), a TF32
// one 7.3e-4 below. Returns the largest relative distance over the pass's output.
double constant_operand_error(const char* variant, ConvPass pass) {
  constexpr std::int64_t kN = 4, kC = 32, kH = 12, kW = 12, kK = 32, kR = 3, kS = 3,
                         kP = kH - kR + 1, kQ = kW - kS + 1;
  const double v = 1.0 + 3.0 / 8192.0;
  auto p = std::get<ConvProblem>(harness::parse_op_problem("conv2d:mb4ic32ih12oc32kh3:cuda"));
  p.pass = pass;
  const Tensor x = Tensor::full({kN, kC, kH, kW}, v, DType::f32, kGpu);
  const Tensor w = Tensor::full({kK, kC, kR, kS}, v, DType::f32, kGpu);
  const Tensor dy = Tensor::full({kN, kK, kP, kQ}, v, DType::f32, kGpu);
  Tensor y = Tensor::empty({kN, kK, kP, kQ}, DType::f32, kGpu);
  Tensor dx = Tensor::empty({kN, kC, kH, kW}, DType::f32, kGpu);
  Tensor dw = Tensor::empty({kK, kC, kR, kS}, DType::f32, kGpu);
  const ConvArgs a{p,
                   x.data_ptr(),
                   w.data_ptr(),
                   /*b=*/nullptr,
                   y.data_ptr(),
                   dy.data_ptr(),
                   dx.data_ptr(),
                   dw.data_ptr(),
                   /*db=*/nullptr};
  const ConvTable::Variant* var = conv_table().find(variant);
  REQUIRE(var != nullptr);
  var->fn(a);
  // Terms per output: forward C*R*S; backward data K times the filter taps that reach (h, w);
  // backward filter N*P*Q.
  const auto taps = [](std::int64_t i, std::int64_t len, std::int64_t out) {
    std::int64_t n = 0;
    for (std::int64_t r = 0; r < len; ++r) n += (i - r >= 0 && i - r < out) ? 1 : 0;
    return n;
  };
  const Tensor& out = pass == ConvPass::forward ? y : pass == ConvPass::backward_data ? dx : dw;
  const std::vector<double> got = values_f64(out.to(Device::cpu()));
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    double terms = 0.0;
    if (pass == ConvPass::forward) {
      terms = static_cast<double>(kC * kR * kS);
    } else if (pass == ConvPass::backward_data) {
      const auto hw = static_cast<std::int64_t>(i) % (kH * kW);
      terms = static_cast<double>(kK * taps(hw / kW, kR, kP) * taps(hw % kW, kS, kQ));
    } else {
      terms = static_cast<double>(kN * kP * kQ);
    }
    const double expected = terms * v * v;
    worst = std::max(worst, std::abs(got[i] - expected) / expected);
  }
  return worst;
}

}  // namespace

TEST_CASE("cuda.cudnn runs the math type it timed; IEEE FP32 never on tensor cores",
          "[cuda][conv]") {
  setup();
  kernels::cudnn_clear_choices();
  for (const bool tf32 : {false, true})
    for (const ConvPass pass :
         {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights}) {
      const char* variant = tf32 ? kernels::kCudnnTf32Variant : kernels::kCudnnDefaultVariant;
      const double err = constant_operand_error(variant, pass);
      auto p = std::get<ConvProblem>(harness::parse_op_problem("conv2d:mb4ic32ih12oc32kh3:cuda"));
      p.pass = pass;
      const kernels::CudnnChoice* c = kernels::cudnn_find_choice(kernels::cudnn_conv_key(p, tf32));
      REQUIRE(c != nullptr);
      INFO(variant << ' ' << conv_pass_name(pass) << ": " << c->algo_name << " runs "
                   << kernels::cudnn_math_name(c->math) << ", timed "
                   << kernels::cudnn_math_name(c->timed_math) << ", relative error " << err << "; "
                   << c->candidates);
      CHECK(c->descriptors != nullptr);
      CHECK(c->workspace <= c->workspace_cap);
      if (tf32) {
        CHECK(c->math == c->timed_math);  // exactly the kernel cuDNN timed
      } else {
        CHECK(c->math == kernels::CudnnMath::fma);  // never DEFAULT: that allows TF32 again
        CHECK(c->timed_math != kernels::CudnnMath::tensor_op);
        CHECK(c->timed_math != kernels::CudnnMath::tensor_op_allow_conversion);
        CHECK(err < 5e-5);  // a TF32 kernel is 7.3e-4 off
      }
      // The second call runs the cached entry itself: no new search, the same entry.
      const std::size_t searched = kernels::cudnn_choices().size();
      CHECK(constant_operand_error(variant, pass) < (tf32 ? 1e-2 : 5e-5));
      CHECK(kernels::cudnn_choices().size() == searched);
      CHECK(kernels::cudnn_find_choice(kernels::cudnn_conv_key(p, tf32)) == c);
    }
}

TEST_CASE("float64 gradient check of conv2d (+ bias, ReLU) run on the GPU",
          "[cuda][conv][gradcheck]") {
  setup();
  struct Case {
    std::int64_t n, c, h, w, k, r, s, st, pad, dil, groups;
  };
  for (const Case& c :
       {Case{2, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1}, Case{1, 4, 7, 7, 6, 3, 2, 2, 1, 1, 2},
        Case{2, 2, 7, 6, 3, 3, 3, 1, 2, 2, 1}}) {
    Conv2dOptions o;
    o.stride = {c.st, c.st};
    o.padding = {c.pad, c.pad};
    o.dilation = {c.dil, c.dil};
    o.groups = c.groups;
    const std::vector<Tensor> inputs = {uniform_leaf({c.n, c.c, c.h, c.w}, -1, 1, 11),
                                        uniform_leaf({c.k, c.c / c.groups, c.r, c.s}, -1, 1, 12),
                                        uniform_leaf({c.k}, -0.5, 0.5, 13)};
    const auto r = test::gradcheck(
        "conv2d_on_cuda",
        [&](const std::vector<Tensor>& in) {
          return anvil::tanh(conv2d(in[0].to(kGpu), in[1].to(kGpu), in[2].to(kGpu), o))
              .to(Device::cpu());
        },
        inputs);
    INFO(r.message);
    CHECK(r.ok);
  }
}

namespace {

// Losses and final parameters of `steps` SGD steps of a small conv net (conv + bias + fused
// ReLU, strided conv, flatten, linear, cross-entropy) built from seed 5 on `device`.
std::pair<std::vector<double>, std::vector<Tensor>> train_conv_net(Device device, int steps) {
  Generator gen(5);
  Conv2dOptions o1;
  o1.padding = {1, 1};
  Conv2dOptions o2;
  o2.stride = {2, 2};
  auto c1 = std::make_shared<nn::Conv2d>(3, 8, std::array<std::int64_t, 2>{3, 3}, o1, true, &gen);
  c1->set_fused_relu(true);
  auto c2 = std::make_shared<nn::Conv2d>(8, 6, std::array<std::int64_t, 2>{3, 3}, o2, true, &gen);
  c2->set_fused_relu(true);
  nn::Sequential net({c1, c2, std::make_shared<nn::Flatten>(),
                      std::make_shared<nn::Linear>(6 * 4 * 4, 5, true, &gen)});
  net.to(device);
  optim::SGD opt(net.parameters(), 0.05);
  const Tensor x = uniform({6, 3, 9, 9}, -1, 1, DType::f32, &gen).to(device);
  const Tensor y = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, 3, 4, 0}, {6}).to(device);
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    net.zero_grad();
    Tensor loss = cross_entropy(net.forward(x), y);
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
  }
  std::vector<Tensor> params;
  for (const Tensor& p : net.parameters()) params.push_back(p.detach().to(Device::cpu()));
  return {losses, params};
}

}  // namespace

TEST_CASE("a conv net trains on the GPU as on the CPU", "[cuda][conv][training]") {
  setup();
  // The CNN models of models/ need pooling and batch norm on the GPU too (ModelInfo::gpu_path,
  // kCnnGpuPath in models/cnn.cpp); this net has only conv, ReLU, linear and the loss.
  const auto cpu = train_conv_net(Device::cpu(), 4);
  const auto gpu = train_conv_net(kGpu, 4);
  for (std::size_t i = 0; i < cpu.first.size(); ++i) {
    INFO("step " << i);
    CHECK(gpu.first[i] == Approx(cpu.first[i]).epsilon(1e-4));  // FP32 on both sides
  }
  CHECK(gpu.first.back() < gpu.first.front());
  REQUIRE(cpu.second.size() == gpu.second.size());
  for (std::size_t i = 0; i < cpu.second.size(); ++i) {
    INFO("parameter " << i);
    CHECK(test::max_abs_diff(cpu.second[i], gpu.second[i]) <= 1e-4);
  }
}
