// SPDX-License-Identifier: Apache-2.0
// The conv2d driver (Note [Op drivers]): each variant called directly on its ConvArgs, one pass
// per problem, outputs pre-filled with NaN, against `ref` in f64 on the host.
// Groups: "odd" (small shapes with odd sizes through every code path: wide and direct chunks,
// 1x1, groups, depthwise, asymmetric stride/padding/dilation, winograd-eligible, 5x5), each
// without and with bias and with a fused relu; "layers" (real AlexNet, ResNet-50, VGG16 and
// cnn_mnist layers at batch 1-2, VGG16 cropped to 32x32, with bias); "half" (the odd shapes
// with bias and three model layers, in bf16 and f16, for the 16-bit variants: Note [Half conv
// tolerance]).
//
// Note [Half conv tolerance]
// A 16-bit case's inputs are bf16/f16 values, so ref's f64 sums of them are exact up to f64,
// and a variant that multiplies in f32 (exact for 8- or 11-bit significands), sums in f32 and
// rounds each output once is off by the f32 sum's error (the f32 bound of this driver, growing
// with the reduction) plus the final rounding, at most u * |ref| with u = 2^-8 (bf16) or 2^-11
// (f16), a fixed part that does not grow with the reduction. tolerance(v, bf16/f16) is that
// part, doubled (2u: the rounded value is itself off by the sum's error); the check adds the
// f32 part. A variant that drops a pass's tail, mixes up the layout or skips the rounding is
// off by order 1 or by far more than 2u on some element.
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "engine/dispatch/conv_problem.h"
#include "harness/drivers/conv2d_entries.h"
#include "harness/drivers/driver_kit.h"
#include "harness/drivers/drivers.h"
#include "harness/problem_descriptor.h"

namespace anvil::harness {
namespace {

// Shapes by their descriptors (Note [Problem descriptors] in harness/problem_descriptor.h).
struct NamedShape {
  const char* name;
  const char* descriptor;
};

const NamedShape kOddShapes[] = {
    {"odd3x3", "mb2ic3ih7iw5oc4kh3ph1"},
    {"stride2 R3S2", "mb2ic5ih9iw8oc6kh3kw2sh2"},
    {"dilation2", "mb1ic4ih9oc5kh3ph2dh1"},
    {"groups2", "mb2g2ic4ih6iw7oc6kh3ph1"},
    {"depthwise", "mb2g8ic8ih6oc8kh3ph1"},
    {"pointwise", "mb3ic6ih5iw4oc7kh1"},
    {"1x1 stride2", "mb2ic8ih7oc16kh1sh2"},
    {"asymmetric", "mb2ic3ih10iw7oc4kh3kw1sw2ph1pw0dh1dw0"},
    {"winograd-able", "mb2ic16ih8oc16kh3ph1"},
    {"batch1 5x5 pad2", "mb1ic6ih11iw13oc5kh5ph2"},
    {"5x5 mixed stride pad dilation", "mb1ic6ih11iw13oc5kh5sh3sw2ph2pw1dw1"},
    {"kernel equals input", "mb2ic3ih4iw5oc2kh4kw5"},
};

const NamedShape kLayerShapes[] = {
    {"alexnet conv1", "mb2ic3ih224oc96kh11sh4ph2"},
    {"alexnet conv2", "mb1ic96ih27oc256kh5ph2"},
    {"alexnet conv3", "mb1ic256ih13oc384kh3ph1"},
    {"resnet50 stem", "mb1ic3ih224oc64kh7sh2ph3"},
    {"resnet50 1x1 64-256 56", "mb2ic64ih56oc256kh1"},
    {"resnet50 3x3 s2 128 56", "mb1ic128ih56oc128kh3sh2ph1"},
    {"resnet50 1x1 s2 projection", "mb2ic256ih56oc512kh1sh2"},
    {"vgg16 3x3 64-64 cropped 32", "mb2ic64ih32oc64kh3ph1"},
    {"cnn_mnist conv1", "mb2ic1ih28oc32kh3"},
    // Big enough per sample that cpu.im2col splits output rows into chunks.
    {"vgg16 3x3 64-8 224 row chunks", "mb1ic64ih224oc8kh3ph1"},
};

// The layers of the "half" group (batch 1-2: ref runs in f64 on every one).
const NamedShape kHalfLayerShapes[] = {
    {"cnn_mnist conv2", "mb2ic32ih26oc64kh3"},
    {"alexnet conv3", "mb1ic256ih13oc384kh3ph1"},
    {"resnet50 1x1 64-256 28", "mb2ic64ih28oc256kh1"},
};

// A shape's problem with the parts of a bias and a fused relu, in f32 unless told.
nn::NamedProblem problem_of(const NamedShape& shape, bool bias, bool relu,
                            DType dtype = DType::f32) {
  const bool half = dtype != DType::f32;
  const std::string type = half ? std::string(dtype_name(dtype)) : std::string();
  const std::string descriptor = detail::str_cat(shape.descriptor, bias ? ":bias" : "",
                                                 relu ? ":relu" : "", half ? ":" : "", type);
  return {
      detail::str_cat(shape.name, bias ? " bias" : "", relu ? " relu" : "", half ? " " : "", type),
      parse_problem("conv2d", descriptor)};
}

// The pass's longest reduction: C/g R S products per y, K/g R S per dx, N P Q per dw and db.
double reduction_length(const ConvProblem& p) {
  switch (p.pass) {
    case ConvPass::forward:
      return static_cast<double>(p.c_per_group()) * p.r * p.s;
    case ConvPass::backward_data:
      return static_cast<double>(p.k_per_group()) * p.r * p.s;
    case ConvPass::backward_weights:
      return static_cast<double>(p.n) * p.p() * p.q();
  }
  return 1.0;
}

class ConvCase final : public OpCase {
 public:
  ConvCase(const ConvTable& table, const ConvProblem& p, std::uint64_t seed,
           std::function<double(const std::string&)> bound)
      : table_(table), p_(p), bound_(std::move(bound)) {
    Generator gen(seed);
    xs_ = {p.n, p.c, p.h, p.w};
    ws_ = {p.k, p.c_per_group(), p.r, p.s};
    ys_ = {p.n, p.k, p.p(), p.q()};
    x_ = uniform_operand(xs_, -1, 1, p.dtype, p.device, gen);
    w_ = uniform_operand(ws_, -1, 1, p.dtype, p.device, gen);
    b_ = uniform_operand({p.k}, -1, 1, p.dtype, p.device, gen);
    dy_ = uniform_operand(ys_, -1, 1, p.dtype, p.device, gen);
  }

  void prepare(const std::string& variant) override {
    fn_ = supported_variant(table_, variant, p_).fn;
    name_ = variant;
    y_ = nan_tensor(ys_, p_.dtype, p_.device);
    dx_ = nan_tensor(xs_, p_.dtype, p_.device);
    dw_ = nan_tensor(ws_, p_.dtype, p_.device);
    db_ = nan_tensor({p_.k}, p_.dtype, p_.device);
  }

  void run() override {
    ANVIL_CHECK(fn_ != nullptr, "conv2d", "run() before prepare()");
    fn_(args(p_, x_.dev, w_.dev, b_.dev, dy_.dev, y_, dx_, dw_, db_));
  }

  std::string check() override {
    if (!ref_y_.defined()) compute_ref();
    const double bound = bound_for(reduction_length(p_));
    switch (p_.pass) {
      case ConvPass::forward:
        return compare_scaled("y", y_, ref_y_, bound);
      case ConvPass::backward_data:
        return compare_scaled("dx", dx_, ref_dx_, bound);
      case ConvPass::backward_weights: {
        std::string bad = compare_scaled("dw", dw_, ref_dw_, bound);
        if (p_.has_bias)
          bad += compare_scaled(
              "db", db_, ref_db_,
              bound_for(static_cast<double>(p_.n) * p_.p() * std::max<std::int64_t>(p_.q(), 1)));
        return bad;
      }
    }
    return "unknown pass; ";
  }

  // The pass's output at `entries` flat indices (the first, the last and random ones from a fixed
  // seed) and 8 of db, against conv2d_entries.h, with check()'s bound (Note [Sampled checks]).
  std::string check_sampled(int entries) override {
    const ConvOperandsF64 in{data(x_.f64), data(w_.f64), p_.has_bias ? data(b_.f64) : nullptr,
                             data(dy_.f64)};
    const Tensor& out = p_.pass == ConvPass::forward         ? y_
                        : p_.pass == ConvPass::backward_data ? dx_
                                                             : dw_;
    const char* name = p_.pass == ConvPass::forward         ? "y (sampled)"
                       : p_.pass == ConvPass::backward_data ? "dx (sampled)"
                                                            : "dw (sampled)";
    std::string bad = compare_at(
        name, out, sample(out.numel(), entries),
        [&](std::int64_t i) { return conv_output_entry(p_, in, i); },
        bound_for(reduction_length(p_)));
    if (p_.pass == ConvPass::backward_weights && p_.has_bias)
      bad += compare_at(
          "db (sampled)", db_, sample(p_.k, 8),
          [&](std::int64_t k) { return conv_bias_grad_entry(p_, in, k); },
          bound_for(static_cast<double>(p_.n) * p_.p() * p_.q()));
    return bad;
  }

 private:
  static const double* data(const Tensor& t) { return t.data<double>(); }
  // `count` flat indices of [0, n): 0, n - 1 and the rest drawn from a fixed seed.
  static std::vector<std::int64_t> sample(std::int64_t n, int count) {
    std::vector<std::int64_t> at;
    std::mt19937_64 rng(7);
    for (int i = 0; i < count && n > 0; ++i)
      at.push_back(i == 0   ? 0
                   : i == 1 ? n - 1
                            : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)));
    return at;
  }
  // compare_scaled over the entries `at` of `got` and their values from `entry`.
  static std::string compare_at(const std::string& what, const Tensor& got,
                                const std::vector<std::int64_t>& at,
                                const std::function<double(std::int64_t)>& entry, double bound) {
    const Tensor host = on_host(got).to(DType::f64);
    const auto n = static_cast<std::int64_t>(at.size());
    Tensor got_at = Tensor::empty({n}, DType::f64), want_at = Tensor::empty({n}, DType::f64);
    for (std::int64_t i = 0; i < n; ++i) {
      got_at.data<double>()[i] = host.data<double>()[at[static_cast<std::size_t>(i)]];
      want_at.data<double>()[i] = entry(at[static_cast<std::size_t>(i)]);
    }
    return compare_scaled(what, got_at, want_at, bound);
  }

  // The bound for a reduction of `length` terms: the tolerance per unit of growth, or for a
  // 16-bit output its fixed rounding part plus the f32 sum's (Note [Half conv tolerance]).
  double bound_for(double length) const {
    const double growth = std::sqrt(std::max(length, 1.0));
    if (!is_half(p_.dtype)) return bound_(name_) * growth;
    return bound_(name_) + kF32SumBound * growth;
  }
  static constexpr double kF32SumBound = 32.0 * 1.1920928955078125e-07;  // 32 f32 epsilons

  static ConvArgs args(const ConvProblem& p, const Tensor& x, const Tensor& w, const Tensor& b,
                       const Tensor& dy, Tensor& y, Tensor& dx, Tensor& dw, Tensor& db) {
    return ConvArgs{p,
                    x.data_ptr(),
                    w.data_ptr(),
                    p.has_bias ? b.data_ptr() : nullptr,
                    y.data_ptr(),
                    dy.data_ptr(),
                    dx.data_ptr(),
                    dw.data_ptr(),
                    p.has_bias ? db.data_ptr() : nullptr};
  }
  void compute_ref() {
    ConvProblem pr = p_;
    pr.dtype = DType::f64;
    pr.device = Device::cpu();
    ref_y_ = Tensor::empty(ys_, DType::f64);
    ref_dx_ = Tensor::empty(xs_, DType::f64);
    ref_dw_ = Tensor::empty(ws_, DType::f64);
    ref_db_ = Tensor::empty({p_.k}, DType::f64);
    const auto* ref = table_.find("ref");
    ANVIL_CHECK(ref != nullptr, "conv2d", "the table has no ref variant");
    ref->fn(args(pr, x_.f64, w_.f64, b_.f64, dy_.f64, ref_y_, ref_dx_, ref_dw_, ref_db_));
  }

  const ConvTable& table_;
  ConvProblem p_;
  std::function<double(const std::string&)> bound_;
  Shape xs_, ws_, ys_;
  Operand x_, w_, b_, dy_;
  std::function<void(const ConvArgs&)> fn_;
  std::string name_;
  Tensor y_, dx_, dw_, db_;
  Tensor ref_y_, ref_dx_, ref_dw_, ref_db_;
};

class ConvDriver final : public TableDriver<ConvProblem, ConvTable> {
 public:
  ConvDriver() : TableDriver(conv_table()) {}

  std::vector<std::string> groups() const override { return {"odd", "layers", "half"}; }

  std::vector<nn::NamedProblem> group(const std::string& name) const override {
    std::vector<nn::NamedProblem> out;
    if (name == "odd") {
      for (const auto& shape : kOddShapes)
        for (bool bias : {false, true})
          for (bool relu : {false, true}) out.push_back(problem_of(shape, bias, relu));
      return out;
    }
    if (name == "half") {
      for (const DType dtype : {DType::bf16, DType::f16}) {
        for (const auto& shape : kOddShapes) out.push_back(problem_of(shape, true, false, dtype));
        for (const auto& shape : kHalfLayerShapes)
          out.push_back(problem_of(shape, true, false, dtype));
      }
      return out;
    }
    ANVIL_CHECK(name == "layers", "conv2d driver", "no problem group '", name,
                "' (expected odd, layers or half)");
    for (const auto& shape : kLayerShapes) {
      out.push_back(problem_of(shape, true, false));
      out.push_back(problem_of(shape, true, true));
    }
    return out;
  }

  // The three passes. A fused relu changes only the forward, and a variant that cannot fuse it
  // runs the plain forward (engine/ops/conv.cpp then applies the relu): both forwards are listed.
  std::vector<OpProblem> passes(const OpProblem& problem) const override {
    const ConvProblem& p = std::get<ConvProblem>(problem);
    ConvProblem q = p;
    q.pass = ConvPass::forward;
    std::vector<OpProblem> out{q};
    q.fuse_relu = false;
    if (p.fuse_relu) out.emplace_back(q);
    for (ConvPass pass : {ConvPass::backward_data, ConvPass::backward_weights}) {
      q.pass = pass;
      out.emplace_back(q);
    }
    return out;
  }

  std::unique_ptr<OpCase> make_case(const OpProblem& p, std::uint64_t seed) const override {
    const ConvProblem& q = std::get<ConvProblem>(p);
    return std::make_unique<ConvCase>(
        table_, q, seed, [this, dt = q.dtype, pass = q.pass](const std::string& v) {
          // Weight gradients sum the longest products: 4x (of the f32 part only for a 16-bit
          // output, Note [Half conv tolerance]).
          const bool longest = pass == ConvPass::backward_weights && !is_half(dt);
          return tolerance(v, dt) * (longest ? 4.0 : 1.0);
        });
  }

  // 32 roundings. Winograd's transforms lose a few more bits than direct sums (16x); on the GPU,
  // cuDNN's Winograd and FFT algorithms more (64x), and so may `cuda.cudnn`, which picks any.
  // bf16/f16: twice the output's unit roundoff, not scaled by the reduction (Note [Half conv
  // tolerance]).
  double tolerance(const std::string& variant, DType dtype) const override {
    if (dtype == DType::bf16) return 2.0 * std::ldexp(1.0, -8);
    if (dtype == DType::f16) return 2.0 * std::ldexp(1.0, -11);
    const bool transform =
        variant.find("winograd") != std::string::npos || variant.find("fft") != std::string::npos;
    double extra = transform ? 16.0 : 1.0;
    if (variant.rfind("cuda.", 0) == 0 && (transform || variant == "cuda.cudnn")) extra = 64.0;
    return 32.0 * extra * rounding_of(variant, dtype);
  }

  // Winograd takes only 3x3 stride-1 problems: of the odd group, the 3x3 stride-1 ones
  // (odd3x3, groups2, depthwise, winograd-able) in their 4 forms x passes. The half group: each
  // 16-bit variant runs its dtype's 15 problems x 3 passes.
  int minimum_problems(const std::string& group, DeviceType device) const override {
    if (device == DeviceType::cuda) return kCudaMinimumPairs;
    if (group == "half") return 40;
    return group == "odd" ? 8 : 3;
  }
};

}  // namespace

std::unique_ptr<OpDriver> make_conv2d_driver() { return std::make_unique<ConvDriver>(); }

}  // namespace anvil::harness
