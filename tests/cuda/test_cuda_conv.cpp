// SPDX-License-Identifier: Apache-2.0
// conv2d on the GPU: every CUDA variant of the conv2d table (cuda.cudnn, cuda.cudnn.tf32 forced,
// each cuda.cudnn.<family>, cuda.custom.im2col) against the CPU `ref` in f64 on odd shapes and on
// the conv layers of AlexNet, ResNet-50, VGG16, cnn_mnist and cnn_cifar (models::kernel_problems,
// batch 1, spatial size cropped to at most 24 so that ref stays fast (about 65 s of f64 ref on 2
// cores); channels, kernel, stride, padding kept), all three passes, f32 with and without bias and
// fused ReLU, and f64 where cuDNN offers it. Every variant must run at least kMinRuns
// problem-passes (a variant that declines everything fails). A float64 gradient check of conv2d run
// on the GPU, the default's choice named in its label, and a small conv net trained on the GPU
// against the CPU. Runs only with a GPU (gpu_main.cpp reports the binary skipped otherwise).
#include <catch2/catch.hpp>

#include <algorithm>
#include <any>
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
#include "helpers/gradcheck.h"
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

ConvProblem make(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                 std::int64_t r, std::int64_t s, std::int64_t st = 1, std::int64_t pad = 0,
                 std::int64_t dil = 1, std::int64_t groups = 1) {
  ConvProblem p;
  p.n = n;
  p.c = c;
  p.h = h;
  p.w = w;
  p.k = k;
  p.r = r;
  p.s = s;
  p.stride_h = p.stride_w = st;
  p.pad_h = p.pad_w = pad;
  p.dil_h = p.dil_w = dil;
  p.groups = groups;
  return p;
}

// Odd shapes: asymmetric sizes, strides, padding, dilation, groups, depthwise, 1x1, 5x5.
std::vector<ConvProblem> small_problems() {
  std::vector<ConvProblem> v = {
      make(2, 3, 7, 5, 4, 3, 3, 1, 1),       make(2, 5, 9, 8, 6, 3, 2, 2, 0),
      make(1, 4, 9, 9, 5, 3, 3, 1, 2, 2),    make(2, 4, 6, 7, 6, 3, 3, 1, 1, 1, 2),
      make(2, 8, 6, 6, 8, 3, 3, 1, 1, 1, 8), make(3, 6, 5, 4, 7, 1, 1),
      make(2, 8, 7, 7, 16, 1, 1, 2),         make(2, 16, 8, 8, 16, 3, 3, 1, 1),
      make(1, 6, 11, 13, 5, 5, 5, 1, 2),     make(2, 3, 4, 5, 2, 4, 5),
  };
  ConvProblem asym = make(2, 3, 10, 7, 4, 3, 1);
  asym.stride_w = 2;
  asym.pad_h = 1;
  asym.dil_h = 2;
  v.push_back(asym);
  return v;
}

// The distinct conv layers of the CNNs at batch 1, cropped to H, W <= 24 (padding kept, and
// the input never smaller than the dilated filter).
std::vector<ConvProblem> layer_problems() {
  std::vector<ConvProblem> out;
  std::set<std::string> seen;
  for (const char* model : {"alexnet", "resnet50", "vgg16", "cnn_mnist", "cnn_cifar"}) {
    for (const auto& nk : models::kernel_problems(model, 1)) {
      if (nk.op != "conv2d") continue;
      ConvProblem p = std::any_cast<ConvProblem>(nk.problem);
      p.pass = ConvPass::forward;
      p.fuse_relu = false;
      p.h = std::max(std::min<std::int64_t>(p.h, 24), p.dil_h * (p.r - 1) + 1);
      p.w = std::max(std::min<std::int64_t>(p.w, 24), p.dil_w * (p.s - 1) + 1);
      if (seen.insert(p.key()).second) out.push_back(p);
    }
  }
  return out;
}

std::string compare(const char* what, const Tensor& got, const Tensor& want, double tol) {
  const auto g = values_f64(raw::to_device(got, Device::cpu())), w = values_f64(want);
  if (g.size() != w.size()) return std::string(what) + ": size mismatch";
  double worst = -1;
  std::size_t at = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    double e = std::fabs(g[i] - w[i]);
    if (std::isnan(e)) e = INFINITY;
    if (e > worst) {
      worst = e;
      at = i;
    }
  }
  if (worst <= tol) return {};
  std::ostringstream os;
  os << what << ": worst |got - ref| = " << worst << " > tol " << tol << " at " << at << " (got "
     << g[at] << ", ref " << w[at] << ")";
  return os.str();
}

struct Tally {
  std::map<std::string, int> ran;
  std::map<std::string, std::map<std::string, int>> declined;
};

// Runs every CUDA conv2d variant on the passes of `base` (dtype, bias, relu applied) and compares
// with ref in f64 on the CPU.
void check_problem(ConvProblem base, DType dtype, bool bias, bool relu, Tally& tally,
                   std::uint64_t seed) {
  Generator gen(seed);
  base.dtype = dtype;
  base.device = kGpu;
  base.has_bias = bias;
  const Shape xs{base.n, base.c, base.h, base.w}, ws{base.k, base.c_per_group(), base.r, base.s};
  const Shape ys{base.n, base.k, base.p(), base.q()};
  const Tensor x64 = uniform(xs, -1, 1, DType::f64, &gen),
               w64 = uniform(ws, -1, 1, DType::f64, &gen);
  const Tensor b64 = uniform({base.k}, -1, 1, DType::f64, &gen);
  const Tensor dy64 = uniform(ys, -1, 1, DType::f64, &gen);
  // The GPU operands hold the same values, rounded to dtype; ref runs on those rounded values.
  const Tensor xd = raw::to_dtype(x64, dtype), wd = raw::to_dtype(w64, dtype);
  const Tensor bd = raw::to_dtype(b64, dtype), dyd = raw::to_dtype(dy64, dtype);
  const Tensor xr = raw::to_dtype(xd, DType::f64), wr = raw::to_dtype(wd, DType::f64);
  const Tensor br = raw::to_dtype(bd, DType::f64), dyr = raw::to_dtype(dyd, DType::f64);
  const Tensor xg = raw::to_device(xd, kGpu), wg = raw::to_device(wd, kGpu);
  const Tensor bg = raw::to_device(bd, kGpu), dyg = raw::to_device(dyd, kGpu);
  const ConvTable::Variant* ref = conv_table().find("ref");
  REQUIRE(ref != nullptr);
  const double eps = dtype == DType::f64 ? std::numeric_limits<double>::epsilon()
                                         : std::numeric_limits<float>::epsilon();
  for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights}) {
    if (relu && pass != ConvPass::forward) continue;
    ConvProblem p = base;
    p.pass = pass;
    p.fuse_relu = relu && pass == ConvPass::forward;
    ConvProblem pr = p;
    pr.dtype = DType::f64;
    pr.device = Device::cpu();
    Tensor y64 = Tensor::empty(ys, DType::f64), dx64 = Tensor::empty(xs, DType::f64);
    Tensor dw64 = Tensor::empty(ws, DType::f64), db64 = Tensor::empty({p.k}, DType::f64);
    ConvArgs ra;
    ra.problem = pr;
    ra.x = xr.data_ptr();
    ra.w = wr.data_ptr();
    ra.b = br.data_ptr();
    ra.y = y64.data_ptr();
    ra.dy = dyr.data_ptr();
    ra.dx = dx64.data_ptr();
    ra.dw = dw64.data_ptr();
    ra.db = db64.data_ptr();
    ref->fn(ra);
    const double len = pass == ConvPass::forward         ? double(p.c_per_group()) * p.r * p.s
                       : pass == ConvPass::backward_data ? double(p.k_per_group()) * p.r * p.s
                                                         : double(p.n) * p.p() * p.q();
    for (const auto& v : conv_table().variants()) {
      if (v.device != DeviceType::cuda) continue;
      INFO("variant " << v.name << " on " << p.repr());
      const Support s = v.supports ? v.supports(p) : Support::yes();
      if (!s.ok) {
        CHECK_FALSE(s.reason.empty());
        ++tally.declined[v.name][s.reason.substr(0, 120)];
        continue;
      }
      ++tally.ran[v.name];
      const double nan = std::numeric_limits<double>::quiet_NaN();
      Tensor y = raw::to_device(Tensor::full(ys, nan, dtype), kGpu);
      Tensor dx = raw::to_device(Tensor::full(xs, nan, dtype), kGpu);
      Tensor dw = raw::to_device(Tensor::full(ws, nan, dtype), kGpu);
      Tensor db = raw::to_device(Tensor::full({p.k}, nan, dtype), kGpu);
      ConvArgs a;
      a.problem = p;
      a.x = xg.data_ptr();
      a.w = wg.data_ptr();
      a.b = bias ? bg.data_ptr() : nullptr;
      a.y = y.data_ptr();
      a.dy = dyg.data_ptr();
      a.dx = dx.data_ptr();
      a.dw = dw.data_ptr();
      a.db = bias ? db.data_ptr() : nullptr;
      REQUIRE_NOTHROW(v.fn(a));
      // Error bound: sqrt(reduction length) rounding steps of eps on |values| <= 1; TF32 rounds
      // the operands to 10 mantissa bits (2^13 x FP32's eps); Winograd/FFT transforms lose a few
      // more bits than direct sums.
      double scale = 32.0 * std::sqrt(std::max(len, 1.0)) * (bias ? 2.0 : 1.0);
      if (v.name == kernels::kCudnnTf32Variant) scale *= 8192.0;
      if (v.name.find("winograd") != std::string::npos || v.name.find("fft") != std::string::npos ||
          v.name == kernels::kCudnnDefaultVariant)
        scale *= 64.0;  // the default may pick either
      const double tol = scale * eps * (pass == ConvPass::backward_weights ? 4.0 : 1.0);
      std::string bad;
      if (pass == ConvPass::forward) bad = compare("y", y, y64, tol);
      if (pass == ConvPass::backward_data) bad = compare("dx", dx, dx64, tol);
      if (pass == ConvPass::backward_weights) {
        bad = compare("dw", dw, dw64, tol);
        if (bias && bad.empty()) bad = compare("db", db, db64, tol);
      }
      INFO(bad);
      CHECK(bad.empty());
    }
  }
}

void report(Tally& tally, bool require_min) {
  for (const auto& v : conv_table().variants()) {
    if (v.device != DeviceType::cuda) continue;
    std::ostringstream os;
    os << "conv2d variant " << v.name << ": ran " << tally.ran[v.name] << " problem-passes";
    for (const auto& [reason, count] : tally.declined[v.name])
      os << "; declined " << count << " (" << reason << ")";
    INFO(os.str());
    WARN(os.str());
    if (require_min) CHECK(tally.ran[v.name] >= kMinRuns);
  }
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
  ConvProblem p = make(2, 3, 8, 8, 4, 3, 3, 1, 1);
  p.device = kGpu;
  CHECK(conv_table().select(p).name == "cuda.cudnn");  // the default; TF32 never by default
  CHECK_FALSE(conv_table().find("cuda.cudnn.tf32")->supports == nullptr);
  CHECK(conv_table().find("cuda.cudnn.tf32")->opt_in);
}

TEST_CASE("CUDA conv2d variants match ref on odd shapes, f32 and f64", "[cuda][conv]") {
  setup();
  // The variants' functions are called directly, so the opt-in TF32 variant runs too.
  Tally tally;
  std::uint64_t seed = 1;
  for (const ConvProblem& p : small_problems()) {
    check_problem(p, DType::f32, false, false, tally, seed++);
    check_problem(p, DType::f32, true, false, tally, seed++);
    check_problem(p, DType::f32, true, true, tally, seed++);
  }
  report(tally, true);
  Tally t64;
  for (const ConvProblem& p : small_problems())
    check_problem(p, DType::f64, true, false, t64, seed++);
  report(t64, false);  // f64: cuDNN supports only some algorithms; counted, not required
  CHECK(t64.ran["cuda.cudnn"] >= kMinRuns);
}

TEST_CASE("CUDA conv2d variants match ref on the CNNs' conv layers", "[cuda][conv]") {
  setup();
  Tally tally;
  std::uint64_t seed = 1000;
  const auto layers = layer_problems();
  REQUIRE(layers.size() >= 10);
  for (const ConvProblem& p : layers) check_problem(p, DType::f32, true, false, tally, seed++);
  report(tally, true);
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
  INFO(choices[0].second.problem << " -> " << choices[0].second.algo_name << "; "
                                 << choices[0].second.candidates);
  CHECK(choices[0].second.algo_name.rfind("CUDNN_CONVOLUTION_FWD_ALGO_", 0) == 0);
  const Tensor y2 = conv2d(x, w, Tensor(), o);  // cached: no second search
  CHECK(kernels::cudnn_choices().size() == 1);
  CHECK(test::max_abs_diff(y1.to(Device::cpu()), y2.to(Device::cpu())) == 0.0);
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
