// SPDX-License-Identifier: Apache-2.0
// Autocast of the convolution networks (Note [Autocast policy]): conv2d and conv2d_relu run in
// the low type, with the same bits as on hand-cast inputs and gradients reaching f32 weights in
// f32; batch norm casts 16-bit inputs up to f32; the pooling ops run in their input's type, so a
// conv -> pool -> conv chain stays 16-bit with no cast around the pool; a bf16 convolution goes
// to cpu.onednn.bf16 where the CPU has avx512_bf16 and to the named fallback when it is masked.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "anvil/anvil.h"
#include "engine/autograd/autocast.h"
#include "engine/autograd/autograd_meta.h"
#include "engine/dispatch/conv_problem.h"
#include "engine/ops/conv.h"
#include "helpers/gradcheck.h"
#include "helpers/half_bits.h"
#include "kernels/cpu/bf16/gemm_half.h"
#include "models/training_step.h"

using namespace anvil;
using test::bits_of;
using test::values_f64;

namespace {
constexpr Precision kMixed[] = {Precision::bf16, Precision::fp16};
}  // namespace

TEST_CASE("low-precision list: conv2d and conv2d_relu run in the low type", "[autocast][conv]") {
  Generator g(21);
  const Tensor x = uniform({2, 3, 9, 7}, -1.0, 1.0, DType::f32, &g);
  const Tensor w = uniform({4, 3, 3, 3}, -0.5, 0.5, DType::f32, &g);
  const Tensor b = uniform({4}, -0.5, 0.5, DType::f32, &g);
  const Conv2dOptions o{.stride = {1, 2}, .padding = {1, 1}};
  for (const Precision p : kMixed) {
    const DType low = low_precision_dtype(p);
    INFO(precision_name(p));
    Tensor y, yr;
    {
      const AutocastGuard autocast(p);
      y = conv2d(x, w, b, o);
      yr = conv2d_relu(x, w, b, o);
    }
    REQUIRE(y.dtype() == low);
    REQUIRE(yr.dtype() == low);
    CHECK(bits_of(y) == bits_of(conv2d(x.to(low), w.to(low), b.to(low), o)));
    CHECK(bits_of(yr) == bits_of(relu(y)));
    // Within the type's rounding of the f32 result (|y| <= ~4; bf16 keeps 8 bits, f16 11).
    const double tol = low == DType::bf16 ? 0.05 : 0.01;
    const Tensor y32 = conv2d(x, w, b, o);
    CHECK(test::max_abs_diff(y.to(DType::f64), y32.to(DType::f64)) < tol);
    CHECK(test::max_abs_diff(y.to(DType::f64), y32.to(DType::f64)) > 0.0);
  }
}

TEST_CASE("conv2d gradients reach f32 weights in f32 under autocast", "[autocast][conv]") {
  Generator g(22);
  const Tensor x = uniform({2, 3, 8, 8}, -1.0, 1.0, DType::f32, &g);
  for (const Precision p : kMixed) {
    INFO(precision_name(p));
    Tensor w = uniform({5, 3, 3, 3}, -0.5, 0.5, DType::f32, &g);
    Tensor b = Tensor::zeros({5});
    Tensor w_ref = w.detach().clone(), b_ref = b.detach().clone();
    for (Tensor* t : {&w, &b, &w_ref, &b_ref}) t->set_requires_grad(true);
    {
      const AutocastGuard autocast(p);
      const Tensor h = conv2d_relu(x, w, b, {.padding = {1, 1}});
      REQUIRE(h.dtype() == low_precision_dtype(p));
      sum(h).backward();  // fp32 list: an f32 loss
    }
    sum(conv2d_relu(x, w_ref, b_ref, {.padding = {1, 1}})).backward();
    REQUIRE(w.grad().defined());
    CHECK(w.grad().dtype() == DType::f32);
    CHECK(b.grad().dtype() == DType::f32);
    // dw sums 2*8*8 = 128 products of |x| <= 1: |dw| up to ~60; bf16 keeps 8 bits.
    const double tol = p == Precision::bf16 ? 1.0 : 0.15;
    CHECK(test::max_abs_diff(w.grad(), w_ref.grad()) < tol);
    CHECK(test::max_abs_diff(b.grad(), b_ref.grad()) < tol);
  }
}

TEST_CASE("fp32 list: batch norm casts 16-bit inputs up", "[autocast][conv]") {
  Generator g(23);
  const Tensor x32 = uniform({2, 3, 6, 6}, -2.0, 2.0, DType::f32, &g);
  const Tensor gamma = Tensor::ones({3}), beta = Tensor::zeros({3});
  for (const Precision p : kMixed) {
    INFO(precision_name(p));
    const Tensor x = x32.to(low_precision_dtype(p));
    const AutocastGuard autocast(p);
    Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});
    const Tensor bn = batch_norm2d(x, gamma, beta, rm, rv, true, 0.1, 1e-5);
    CHECK(bn.dtype() == DType::f32);
    Tensor rm2 = Tensor::zeros({3}), rv2 = Tensor::ones({3});
    CHECK(values_f64(bn) ==
          values_f64(batch_norm2d(x.to(DType::f32), gamma, beta, rm2, rv2, true, 0.1, 1e-5)));
    CHECK(rm.dtype() == DType::f32);  // running statistics stay f32
  }
}

TEST_CASE("pooling runs in its input's type under autocast", "[autocast][conv][pool]") {
  Generator g(24);
  const Tensor x32 = uniform({2, 3, 6, 6}, -2.0, 2.0, DType::f32, &g);
  for (const Precision p : kMixed) {
    const DType low = low_precision_dtype(p);
    INFO(precision_name(p));
    const Tensor x = x32.to(low);
    const AutocastGuard autocast(p);
    CHECK(autocast_list_of("max_pool2d") == AutocastList::unlisted);
    // Max pooling selects: the same bits as pooling the widened input and rounding back.
    const Pool2dOptions two{.kernel = {2, 2}};
    const Tensor mp = max_pool2d(x, two);
    REQUIRE(mp.dtype() == low);
    CHECK(bits_of(mp) == bits_of(max_pool2d(x.to(DType::f32), two).to(low)));
    // Averages sum in f32 and round once: within the type's rounding of the f32 average
    // (|avg| <= 2; bf16 keeps 8 bits, f16 11).
    const Pool2dOptions three{.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}};
    const Tensor ap = avg_pool2d(x, three);
    REQUIRE(ap.dtype() == low);
    const double tol = low == DType::bf16 ? 2.0 / 128 : 2.0 / 1024;
    CHECK(test::max_abs_diff(ap.to(DType::f64),
                             avg_pool2d(x.to(DType::f32), three).to(DType::f64)) < tol);
    CHECK(adaptive_avg_pool2d(x, {1, 1}).dtype() == low);
    CHECK(adaptive_avg_pool2d(x, {4, 5}).dtype() == low);
    CHECK(global_avg_pool2d(x).dtype() == low);
    CHECK(max_pool2d(x32, two).dtype() == DType::f32);  // an f32 input stays f32
  }
}

namespace {

// ||a - b|| / ||b|| over all elements (f64).
double relative_l2(const Tensor& a, const Tensor& b) {
  const auto va = values_f64(a), vb = values_f64(b);
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < vb.size(); ++i) {
    diff += (va[i] - vb[i]) * (va[i] - vb[i]);
    norm += vb[i] * vb[i];
  }
  return std::sqrt(diff / norm);
}

// The node that produced t (its grad_fn); null for a leaf or a tensor without autograd.
const Node* producer(const Tensor& t) {
  const AutogradMeta* meta = autograd_meta(t);
  return meta == nullptr ? nullptr : meta->grad_fn.get();
}

// The node feeding input i of n (null when that input needs no gradient).
const Node* input_node(const Node* n, std::size_t i) {
  REQUIRE(n != nullptr);
  REQUIRE(n->next().size() > i);
  return n->next()[i].valid() ? n->next()[i].node.get() : nullptr;
}

}  // namespace

TEST_CASE("a 16-bit conv -> pool -> conv chain has no cast around the pool",
          "[autocast][conv][pool]") {
  Generator g(25);
  const Tensor x = uniform({2, 3, 12, 12}, -1.0, 1.0, DType::f32, &g);
  for (const Precision p : kMixed) {
    const DType low = low_precision_dtype(p);
    INFO(precision_name(p));
    Tensor w1 = uniform({4, 3, 3, 3}, -0.5, 0.5, DType::f32, &g);
    Tensor w2 = uniform({5, 4, 3, 3}, -0.5, 0.5, DType::f32, &g);
    Tensor b1 = Tensor::zeros({4}), b2 = Tensor::zeros({5});
    Tensor w1_ref = w1.detach().clone(), w2_ref = w2.detach().clone();
    Tensor b1_ref = b1.detach().clone(), b2_ref = b2.detach().clone();
    for (Tensor* t : {&w1, &w2, &b1, &b2, &w1_ref, &w2_ref, &b1_ref, &b2_ref})
      t->set_requires_grad(true);
    const auto chain = [](const Tensor& in, const Tensor& wa, const Tensor& ba, const Tensor& wb,
                          const Tensor& bb) {
      const Tensor h1 = conv2d_relu(in, wa, ba, {.padding = {1, 1}});
      const Tensor m = max_pool2d(h1, Pool2dOptions{.kernel = {2, 2}});
      const Tensor h2 = conv2d_relu(m, wb, bb, {.padding = {1, 1}});
      const Tensor a = avg_pool2d(h2, Pool2dOptions{.kernel = {2, 2}});
      return std::vector<Tensor>{h1, m, h2, a};
    };
    {
      const AutocastGuard autocast(p);
      const auto t = chain(x, w1, b1, w2, b2);
      for (const Tensor& v : t) CHECK(v.dtype() == low);
      // Read through the graph: each pool's input edge goes straight to the conv before it,
      // and the second conv's input edge straight to the max pool (no ToDTypeBackward between).
      const Node* pool1 = producer(t[1]);
      const Node* conv2 = producer(t[2]);
      const Node* pool2 = producer(t[3]);
      REQUIRE(pool1 != nullptr);
      REQUIRE(conv2 != nullptr);
      REQUIRE(pool2 != nullptr);
      CHECK(pool1->name() == "MaxPool2dBackward");
      CHECK(input_node(pool1, 0) == producer(t[0]));
      CHECK(input_node(conv2, 0) == pool1);
      CHECK(pool2->name() == "AvgPool2dBackward");
      CHECK(input_node(pool2, 0) == conv2);
      sum(t[3]).backward();  // fp32 list: an f32 loss
    }
    sum(chain(x, w1_ref, b1_ref, w2_ref, b2_ref)[3]).backward();
    // Gradients reach the f32 parameters in f32, close to the fp32 chain's in relative L2:
    // measured 0 to 0.035 (a rounding can flip a relu or a window's maximum, moving whole
    // gradient terms); a wrong or mis-laid-out pass is uncorrelated, about 1.4.
    for (const auto& [got, want] : {std::pair{&w1, &w1_ref}, std::pair{&w2, &w2_ref},
                                    std::pair{&b1, &b1_ref}, std::pair{&b2, &b2_ref}}) {
      REQUIRE(got->grad().defined());
      CHECK(got->grad().dtype() == DType::f32);
      CHECK(relative_l2(got->grad(), want->grad()) < 0.2);
    }
  }
}

TEST_CASE("a bf16 convolution runs on oneDNN's avx512_bf16 kernel or the named fallback",
          "[autocast][conv][bf16]") {
  register_builtin_kernels();
  const Tensor x = Tensor::zeros({2, 16, 12, 12}, DType::bf16);
  const Tensor w = Tensor::zeros({32, 16, 3, 3}, DType::bf16);
  const ConvProblem p = ops::conv2d_problem(x, w, Tensor(), Conv2dOptions{});
  const std::string native = conv_table().select_uncached(p).name;
  if (kernels::gemm_bf16_native_available())
    CHECK(native == "cpu.onednn.bf16");
  else
    CHECK(native == "cpu.bf16_via_f32");
  kernels::set_gemm_bf16_mask_native(true);  // as on a CPU without avx512_bf16
  const std::string masked = conv_table().select_uncached(p).name;
  kernels::set_gemm_bf16_mask_native(false);
  CHECK(masked == "cpu.bf16_via_f32");
  ConvProblem h = p;
  h.dtype = DType::f16;
  CHECK(conv_table().select_uncached(h).name == "cpu.f16_via_f32");
}

TEST_CASE("one AlexNet training step under bf16 autocast stays close to fp32's",
          "[autocast][conv][models]") {
  // Batch 2 at 224x224: every AlexNet layer in bf16 (five convolutions, three linears, the
  // pools), the loss in f32; the same weights, batch and dropout masks as the fp32 step
  // (the same seed: the model's own generator draws both).
  models::TrainingStep fp32("alexnet", 2, /*seed=*/7);
  models::TrainingStep bf16("alexnet", 2, /*seed=*/7);
  std::vector<Tensor> before;
  for (const auto& np : fp32.net().named_parameters()) before.push_back(np.second.detach().clone());
  fp32.train_step();
  {
    const AutocastGuard autocast(Precision::bf16);
    bf16.train_step();
  }
  const double l32 = fp32.last_loss(), l16 = bf16.last_loss();
  INFO("loss fp32 " << l32 << ", bf16 " << l16);
  CHECK(std::isfinite(l16));
  CHECK(l16 != l32);  // it did run in bf16
  // A freshly initialised AlexNet's loss is about ln(1000) = 6.9; bf16 activations move it by
  // well under 1 %.
  CHECK(std::abs(l16 - l32) < 0.01 * std::abs(l32));
  // Each parameter's SGD update (its gradient through every layer's bf16 backward) against
  // fp32's, in relative L2. bf16 rounds each pre-activation by ~2^-9 of its scale, so the relu
  // units nearest zero switch sides (a fraction of a percent of them), and each switched unit
  // changes its gradient terms by their whole size: measured 0.2-0.5 % for fc8 (no relu above
  // it), 8-11 % for fc6/fc7 and 12-25 % for the convolutions. A wrong or mis-laid-out pass is
  // uncorrelated with fp32's update, about 1.4 (or far more); 0.5 tells the two apart.
  const auto after32 = fp32.net().named_parameters();
  const auto after16 = bf16.net().named_parameters();
  REQUIRE(after16.size() == before.size());
  for (std::size_t i = 0; i < before.size(); ++i) {
    INFO(after16[i].first);
    CHECK(after16[i].second.dtype() == DType::f32);  // master weights stay f32
    const Tensor d32 = after32[i].second.detach() - before[i];
    const Tensor d16 = after16[i].second.detach() - before[i];
    const double err = relative_l2(d16, d32);
    INFO("relative L2 of the update " << err);
    CHECK(err < 0.5);
    if (after16[i].first == "fc8.weight") CHECK(err < 0.02);  // no relu above it
  }
}
