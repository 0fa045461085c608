// SPDX-License-Identifier: Apache-2.0
// The pure logic of the cuDNN conv2d variants (kernels/cudnn_conv_plan.h), on the CPU: variant
// names and their algorithm of each pass (Note [cuDNN algorithm families]), descriptor
// parameters of a problem, refusal messages, the find-cache key, the math type rule, the
// workspace cap, and the choice cache behind cuda.cudnn's labels and dispatch log. The cuDNN calls
// themselves run only on a GPU (tests/cuda/test_cuda_conv.cpp).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <set>
#include <string>

#include "kernels/cudnn_conv_plan.h"
#include "kernels/stable_cache.h"

using namespace anvil;
using namespace anvil::kernels;
using Catch::Contains;

namespace {
ConvProblem problem(ConvPass pass = ConvPass::forward) {
  ConvProblem p;
  p.pass = pass;
  p.device = Device::cuda(0);
  p.n = 8;
  p.c = 6;
  p.h = 13;
  p.w = 11;
  p.k = 4;
  p.r = 3;
  p.s = 5;
  p.stride_h = 2;
  p.stride_w = 1;
  p.pad_h = 1;
  p.pad_w = 2;
  p.dil_h = 1;
  p.dil_w = 2;
  p.groups = 2;
  p.has_bias = true;
  return p;
}
}  // namespace

TEST_CASE("cuDNN variant names round-trip and are distinct", "[cudnn][plan]") {
  std::set<std::string> names;
  for (CudnnConvAlgo a : kCudnnConvAlgos) {
    const std::string n = cudnn_variant_name(a);
    CHECK(n.rfind("cuda.cudnn.", 0) == 0);
    REQUIRE(cudnn_algo_from_variant(n).has_value());
    CHECK(*cudnn_algo_from_variant(n) == a);
    names.insert(n);
  }
  CHECK(names.size() == static_cast<std::size_t>(kCudnnConvAlgoCount));
  CHECK(cudnn_variant_name(CudnnConvAlgo::fft_tiling) == "cuda.cudnn.fft_tiling");
  CHECK_FALSE(cudnn_algo_from_variant("cuda.cudnn").has_value());
  CHECK_FALSE(cudnn_algo_from_variant("cuda.cudnn.tf32").has_value());
  CHECK_FALSE(cudnn_algo_from_variant("cuda.cudnn.direct").has_value());  // not registered
}

TEST_CASE("each cuDNN family maps to the matching algorithm of every pass", "[cudnn][plan]") {
  using P = ConvPass;
  const auto name = [](CudnnConvAlgo a, P pass) {
    return cudnn_algo_enum_name(pass, cudnn_algo_value(a, pass));
  };
  CHECK(name(CudnnConvAlgo::implicit_gemm, P::forward) ==
        "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM");
  CHECK(name(CudnnConvAlgo::implicit_precomp_gemm, P::forward) ==
        "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM");
  CHECK(name(CudnnConvAlgo::gemm, P::forward) == "CUDNN_CONVOLUTION_FWD_ALGO_GEMM");
  CHECK(name(CudnnConvAlgo::implicit_precomp_gemm, P::backward_weights) ==
        "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3");
  // Transform-based families keep their transform in every pass.
  for (CudnnConvAlgo a : {CudnnConvAlgo::fft, CudnnConvAlgo::fft_tiling})
    for (P pass : {P::forward, P::backward_data, P::backward_weights}) {
      INFO(cudnn_algo_name(a) << ' ' << conv_pass_name(pass));
      const std::string n = name(a, pass);
      CHECK_THAT(n, Contains("_FFT"));
      CHECK((a == CudnnConvAlgo::fft_tiling) == (n.find("FFT_TILING") != std::string::npos));
    }
  CHECK(name(CudnnConvAlgo::winograd, P::forward) == "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD");
  CHECK(name(CudnnConvAlgo::winograd, P::backward_data) ==
        "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD");
  // cuDNN's fused Winograd filter gradient is not implemented: the non-fused one stands in.
  CHECK(name(CudnnConvAlgo::winograd, P::backward_weights) ==
        "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED");
  for (P pass : {P::forward, P::backward_data, P::backward_weights})
    CHECK_THAT(name(CudnnConvAlgo::winograd_nonfused, pass), Contains("WINOGRAD_NONFUSED"));
  // No family uses the unimplemented forward DIRECT (3).
  for (CudnnConvAlgo a : kCudnnConvAlgos) CHECK(cudnn_algo_value(a, P::forward) != 3);
  CHECK(cudnn_algo_enum_name(P::forward, 3) == "CUDNN_CONVOLUTION_FWD_ALGO_DIRECT");
  CHECK(cudnn_algo_enum_name(P::backward_data, 9) == "CUDNN_CONVOLUTION_BWD_DATA_ALGO_9?");
}

TEST_CASE("cuDNN descriptor parameters of a conv problem", "[cudnn][plan]") {
  const ConvProblem p = problem();
  const CudnnConvDims d = cudnn_conv_dims(p, "test");
  CHECK(std::vector<int>(d.x, d.x + 4) == std::vector<int>{8, 6, 13, 11});
  CHECK(std::vector<int>(d.w, d.w + 4) == std::vector<int>{4, 3, 3, 5});  // C/groups = 3
  // P = (13 + 2 - 2 - 1) / 2 + 1 = 7, Q = (11 + 4 - 8 - 1) / 1 + 1 = 7.
  CHECK(std::vector<int>(d.y, d.y + 4) == std::vector<int>{8, 4, 7, 7});
  CHECK(std::vector<int>(d.bias, d.bias + 4) == std::vector<int>{1, 4, 1, 1});
  CHECK(d.pad[0] == 1);
  CHECK(d.pad[1] == 2);
  CHECK(d.stride[0] == 2);
  CHECK(d.stride[1] == 1);
  CHECK(d.dilation[0] == 1);
  CHECK(d.dilation[1] == 2);
  CHECK(d.groups == 2);
  ConvProblem big = p;
  big.n = 70000;
  big.c = 64;
  big.h = big.w = 224;
  big.groups = 1;
  CHECK_THROWS_WITH(cudnn_conv_dims(big, "test"), Contains("int strides"));
}

TEST_CASE("cuDNN conv refusals before asking cuDNN", "[cudnn][plan]") {
  ConvProblem p = problem();
  CHECK(cudnn_basic_support(p, false).ok);
  CHECK(cudnn_basic_support(p, true).ok);
  p.dtype = DType::f64;
  CHECK(cudnn_basic_support(p, false).ok);
  CHECK_THAT(cudnn_basic_support(p, true).reason, Contains("f32 only"));
  p.dtype = DType::i32;
  CHECK_THAT(cudnn_basic_support(p, false).reason, Contains("f32 or f64"));
  p = problem();
  p.fuse_relu = true;
  CHECK(cudnn_basic_support(p, false).ok);
  p.has_bias = false;
  CHECK_THAT(cudnn_basic_support(p, false).reason, Contains("needs a bias"));
  p.has_bias = true;
  p.dtype = DType::f64;
  CHECK_FALSE(cudnn_basic_support(p, false).ok);
  const std::string r = cudnn_refusal(problem(ConvPass::backward_data), CudnnConvAlgo::winograd,
                                      "CUDNN_STATUS_NOT_SUPPORTED");
  CHECK(r ==
        "cuDNN reports CUDNN_STATUS_NOT_SUPPORTED for CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD "
        "(cuda.cudnn.winograd, backward_data)");
}

TEST_CASE("Winograd is refused for f32 filters above 3x3 only", "[cudnn][plan]") {
  // See Note [Winograd on large filters]
  for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights})
    for (CudnnConvAlgo algo : kCudnnConvAlgos) {
      INFO(conv_pass_name(pass) << " " << cudnn_algo_name(algo));
      const bool winograd =
          algo == CudnnConvAlgo::winograd || algo == CudnnConvAlgo::winograd_nonfused;
      const int value = cudnn_algo_value(algo, pass);
      ConvProblem p = problem(pass);  // 3x5, f32
      p.dtype = DType::f32;
      CHECK(cudnn_accuracy_refusal(p, value).empty() == !winograd);
      if (winograd)
        CHECK_THAT(cudnn_accuracy_refusal(p, value),
                   Contains("3x5 f32 filter") && Contains(cudnn_algo_enum_name(pass, value)));
      p.r = 3;
      p.s = 3;
      CHECK(cudnn_accuracy_refusal(p, value).empty());
      p.r = 1;
      p.s = 7;
      CHECK(cudnn_accuracy_refusal(p, value).empty() == !winograd);
      p.dtype = DType::f64;
      CHECK(cudnn_accuracy_refusal(p, value).empty());
    }
}

TEST_CASE("the find-cache key separates what changes the search", "[cudnn][plan]") {
  const ConvProblem p = problem();
  const CudnnConvKeyHash hash;
  ConvProblem fused = p;
  fused.fuse_relu = true;
  CHECK(cudnn_conv_key(p, false) == cudnn_conv_key(fused, false));  // same algorithm
  CHECK(hash(cudnn_conv_key(p, false)) == hash(cudnn_conv_key(fused, false)));
  CHECK_FALSE(cudnn_conv_key(fused, false).problem.fuse_relu);
  CHECK_FALSE(cudnn_conv_key(p, false) == cudnn_conv_key(p, true));  // TF32 searched apart
  CHECK(hash(cudnn_conv_key(p, false)) != hash(cudnn_conv_key(p, true)));
  std::set<std::size_t> hashes{hash(cudnn_conv_key(p, false))};
  const std::vector<void (*)(ConvProblem&)> changes = {
      [](ConvProblem& q) { q.pass = ConvPass::backward_data; },
      [](ConvProblem& q) { q.dtype = DType::f64; },
      [](ConvProblem& q) { q.device = Device::cuda(1); },
      [](ConvProblem& q) { q.n = 9; },
      [](ConvProblem& q) { q.c = 12; },
      [](ConvProblem& q) { q.h = 14; },
      [](ConvProblem& q) { q.w = 12; },
      [](ConvProblem& q) { q.k = 8; },
      [](ConvProblem& q) { q.r = 1; },
      [](ConvProblem& q) { q.s = 3; },
      [](ConvProblem& q) { q.stride_h = 1; },
      [](ConvProblem& q) { q.stride_w = 2; },
      [](ConvProblem& q) { q.pad_h = 0; },
      [](ConvProblem& q) { q.pad_w = 0; },
      [](ConvProblem& q) { q.dil_h = 2; },
      [](ConvProblem& q) { q.dil_w = 1; },
      [](ConvProblem& q) { q.groups = 1; },
      [](ConvProblem& q) { q.has_bias = false; }};
  for (std::size_t i = 0; i < changes.size(); ++i) {
    INFO("change " << i);
    ConvProblem q = p;
    changes[i](q);
    CHECK_FALSE(cudnn_conv_key(q, false) == cudnn_conv_key(p, false));
    hashes.insert(hash(cudnn_conv_key(q, false)));
  }
  // Not required of a hash, but a field the hash left out would collide here.
  CHECK(hashes.size() == changes.size() + 1);
  // Swapped values of two fields are different keys with different hashes.
  ConvProblem a = p, b = p;
  a.pad_h = 0;
  a.pad_w = 1;
  b.pad_h = 1;
  b.pad_w = 0;
  CHECK(hash(cudnn_conv_key(a, false)) != hash(cudnn_conv_key(b, false)));
}

TEST_CASE("the math type of a timed cuDNN algorithm and the one it runs with", "[cudnn][plan]") {
  // See Note [cuDNN math type of the timed algorithm]
  using M = CudnnMath;
  CHECK(cudnn_search_math(DType::f32, false) == M::fma);
  CHECK(cudnn_search_math(DType::f32, true) == M::tensor_op);
  CHECK(cudnn_search_math(DType::f64, false) == M::default_math);
  // IEEE f32: never a tensor-op result, and never DEFAULT (TF32 on Ampere and later).
  CHECK_FALSE(cudnn_run_math(M::tensor_op, DType::f32, false).has_value());
  CHECK_FALSE(cudnn_run_math(M::tensor_op_allow_conversion, DType::f32, false).has_value());
  CHECK(cudnn_run_math(M::fma, DType::f32, false) == M::fma);
  CHECK(cudnn_run_math(M::default_math, DType::f32, false) == M::fma);
  // TF32: exactly the timed math type.
  for (M m : {M::default_math, M::tensor_op, M::tensor_op_allow_conversion, M::fma})
    CHECK(cudnn_run_math(m, DType::f32, true) == m);
  // f64: the timed math type, never a down-conversion.
  CHECK(cudnn_run_math(M::default_math, DType::f64, false) == M::default_math);
  CHECK(cudnn_run_math(M::tensor_op, DType::f64, false) == M::tensor_op);
  CHECK_FALSE(cudnn_run_math(M::tensor_op_allow_conversion, DType::f64, false).has_value());
  // Values cuDNN does not define are never run.
  CHECK_FALSE(cudnn_run_math(static_cast<M>(7), DType::f32, true).has_value());
  CHECK(cudnn_math_name(M::fma) == "CUDNN_FMA_MATH");
  CHECK(cudnn_math_name(M::tensor_op) == "CUDNN_TENSOR_OP_MATH");
  CHECK(cudnn_math_name(static_cast<M>(7)) == "CUDNN_MATH_7?");
}

TEST_CASE("workspace cap from free memory and ANVIL_CUDNN_WORKSPACE_MB", "[cudnn][plan]") {
  // See Note [cuDNN workspace cap]
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  // Unset: half of what is available, however large; 1 GiB when that is unknown.
  CHECK(cudnn_workspace_cap("", std::size_t{80} << 30) == std::size_t{40} << 30);
  CHECK(cudnn_workspace_cap("", 300 * kMiB) == 150 * kMiB);
  CHECK(cudnn_workspace_cap("", std::size_t{0}) == 0);
  CHECK(cudnn_workspace_cap("", std::nullopt) == 1024 * kMiB);
  // Set: the value, within what is available.
  CHECK(cudnn_workspace_cap("64", std::size_t{80} << 30) == 64 * kMiB);
  CHECK(cudnn_workspace_cap("4096", 1000 * kMiB) == 1000 * kMiB);
  CHECK(cudnn_workspace_cap("4096", std::nullopt) == 4096 * kMiB);
  CHECK(cudnn_workspace_cap("0", std::size_t{80} << 30) == 0);
  CHECK_THROWS_WITH(cudnn_workspace_cap("lots", std::nullopt),
                    Contains("ANVIL_CUDNN_WORKSPACE_MB"));
  CHECK_THROWS_WITH(cudnn_workspace_cap("-1", std::nullopt), Contains("ANVIL_CUDNN_WORKSPACE_MB"));
  // strtoll read these as 64; the whole text must be the number.
  CHECK_THROWS_WITH(cudnn_workspace_cap(" 64", std::nullopt), Contains("got ' 64'"));
  CHECK_THROWS_WITH(cudnn_workspace_cap("64MB", std::nullopt), Contains("got '64MB'"));
  // The environment is read by cudnn_workspace_cap_bytes.
  ::unsetenv("ANVIL_CUDNN_WORKSPACE_MB");
  CHECK(cudnn_workspace_cap_bytes(std::size_t{8} << 30) == std::size_t{4} << 30);
  ::setenv("ANVIL_CUDNN_WORKSPACE_MB", "64", 1);
  CHECK(cudnn_workspace_cap_bytes(std::size_t{8} << 30) == 64 * kMiB);
  ::setenv("ANVIL_CUDNN_WORKSPACE_MB", "lots", 1);
  CHECK_THROWS_WITH(cudnn_workspace_cap_bytes(std::nullopt), Contains("ANVIL_CUDNN_WORKSPACE_MB"));
  ::unsetenv("ANVIL_CUDNN_WORKSPACE_MB");
}

TEST_CASE("cuda.cudnn's choices label the default once searched", "[cudnn][plan]") {
  cudnn_clear_choices();
  const ConvProblem p = problem();
  CHECK(cudnn_default_label(p) == "cuda.cudnn");
  CHECK(cudnn_find_choice(cudnn_conv_key(p, false)) == nullptr);
  CudnnChoice c;
  c.algo = 4;
  c.algo_name = cudnn_algo_enum_name(ConvPass::forward, 4);
  c.ms = 0.25;
  c.problem = p.repr();
  const CudnnChoice& stored = cudnn_record_choice(cudnn_conv_key(p, false), c);
  CHECK(stored.algo == 4);
  CHECK(cudnn_default_label(p) == "cuda.cudnn[CUDNN_CONVOLUTION_FWD_ALGO_FFT]");
  ConvProblem fused = p;
  fused.fuse_relu = true;
  CHECK(cudnn_default_label(fused) == "cuda.cudnn[CUDNN_CONVOLUTION_FWD_ALGO_FFT]");
  CHECK(cudnn_default_label(p, true) == "cuda.cudnn.tf32");  // TF32 not searched yet
  // The lookup returns the stored entry itself, not a copy.
  CHECK(cudnn_find_choice(cudnn_conv_key(fused, false)) == &stored);
  // A second record for the key (another thread's search) keeps the first.
  CudnnChoice other = c;
  other.algo = 1;
  CHECK(&cudnn_record_choice(cudnn_conv_key(p, false), other) == &stored);
  CHECK(stored.algo == 4);
  REQUIRE(cudnn_choices().size() == 1);
  CHECK(cudnn_choices()[0].algo == 4);
  cudnn_clear_choices();
  CHECK(cudnn_choices().empty());
  CHECK(cudnn_find_choice(cudnn_conv_key(p, false)) == nullptr);
  CHECK(stored.algo == 4);  // forgotten, not destroyed: a reader may still hold it
}

TEST_CASE("StableCache entries stay put while the map grows", "[cudnn][plan]") {
  // See Note [Stable cache entries]
  struct IntHash {
    std::size_t operator()(int v) const noexcept { return static_cast<std::size_t>(v); }
  };
  StableCache<int, std::string, IntHash> cache;
  const auto [first, inserted] = cache.insert(0, std::make_unique<const std::string>("zero"));
  CHECK(inserted);
  for (int i = 1; i < 1000; ++i)  // many rehashes
    cache.insert(i, std::make_unique<const std::string>(std::to_string(i)));
  CHECK(cache.find(0) == first);
  CHECK(*first == "zero");
  const auto [again, inserted_again] = cache.insert(0, std::make_unique<const std::string>("0"));
  CHECK_FALSE(inserted_again);
  CHECK(again == first);
  CHECK(cache.size() == 1000);
  cache.forget_all();
  CHECK(cache.find(0) == nullptr);
  CHECK(*first == "zero");
}
