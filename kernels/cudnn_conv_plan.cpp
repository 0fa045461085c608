// SPDX-License-Identifier: Apache-2.0
// The pure logic of the cuDNN conv2d variants (kernels/cudnn_conv_plan.h): names, algorithm
// families, descriptor parameters, refusals, the find cache and its log. No CUDA headers.
#include "kernels/cudnn_conv_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>

#include "engine/core/config.h"
#include "engine/core/error.h"
#include "engine/core/parse_number.h"
#include "kernels/stable_cache.h"

namespace anvil::kernels {
namespace {

// {forward, backward data, backward filter} enum values per family, in kCudnnConvAlgos order
// (Note [cuDNN algorithm families]).
constexpr int kAlgoValues[kCudnnConvAlgoCount][3] = {
    {0, 0, 0},  // implicit_gemm
    {1, 1, 3},  // implicit_precomp_gemm
    {2, 1, 1},  // gemm
    {4, 2, 2},  // fft
    {5, 3, 6},  // fft_tiling
    {6, 4, 5},  // winograd (the fused filter-gradient Winograd is not implemented in cuDNN)
    {7, 5, 5},  // winograd_nonfused
};

constexpr const char* kFwdNames[] = {
    "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
    "WINOGRAD",      "WINOGRAD_NONFUSED"};
constexpr const char* kBwdDataNames[] = {"0",          "1",        "FFT",
                                         "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
constexpr const char* kBwdFilterNames[] = {
    "0", "1", "FFT", "3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};

int index_of(CudnnConvAlgo algo) { return static_cast<int>(algo); }

using ChoiceCache = StableCache<CudnnConvKey, CudnnChoice, CudnnConvKeyHash>;
ChoiceCache& store() {
  static auto* s = new ChoiceCache();  // leaked: Note [Stable cache entries]
  return *s;
}

int to_int(std::int64_t v, const char* what, const ConvProblem& p, const char* where) {
  ANVIL_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), where, what, "=", v,
              " does not fit cuDNN's int arguments in ", p.repr());
  return static_cast<int>(v);
}

}  // namespace

const char* cudnn_algo_name(CudnnConvAlgo algo) {
  switch (algo) {
    case CudnnConvAlgo::implicit_gemm:
      return "implicit_gemm";
    case CudnnConvAlgo::implicit_precomp_gemm:
      return "implicit_precomp_gemm";
    case CudnnConvAlgo::gemm:
      return "gemm";
    case CudnnConvAlgo::fft:
      return "fft";
    case CudnnConvAlgo::fft_tiling:
      return "fft_tiling";
    case CudnnConvAlgo::winograd:
      return "winograd";
    case CudnnConvAlgo::winograd_nonfused:
      return "winograd_nonfused";
  }
  return "?";
}

std::string cudnn_variant_name(CudnnConvAlgo algo) {
  return std::string(kCudnnDefaultVariant) + "." + cudnn_algo_name(algo);
}

std::optional<CudnnConvAlgo> cudnn_algo_from_variant(const std::string& name) {
  for (CudnnConvAlgo a : kCudnnConvAlgos)
    if (cudnn_variant_name(a) == name) return a;
  return std::nullopt;
}

int cudnn_algo_value(CudnnConvAlgo algo, ConvPass pass) {
  return kAlgoValues[index_of(algo)][static_cast<int>(pass)];
}

std::string cudnn_algo_enum_name(ConvPass pass, int value) {
  const char* prefix = pass == ConvPass::forward         ? "CUDNN_CONVOLUTION_FWD_ALGO_"
                       : pass == ConvPass::backward_data ? "CUDNN_CONVOLUTION_BWD_DATA_ALGO_"
                                                         : "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_";
  const char* const* names = pass == ConvPass::forward         ? kFwdNames
                             : pass == ConvPass::backward_data ? kBwdDataNames
                                                               : kBwdFilterNames;
  const int count = pass == ConvPass::forward ? 8 : pass == ConvPass::backward_data ? 6 : 7;
  if (value < 0 || value >= count) return detail::str_cat(prefix, value, "?");
  return std::string(prefix) + names[value];
}

CudnnConvDims cudnn_conv_dims(const ConvProblem& p, const char* where) {
  CudnnConvDims d;
  const auto i = [&](std::int64_t v, const char* what) { return to_int(v, what, p, where); };
  d.x[0] = i(p.n, "N");
  d.x[1] = i(p.c, "C");
  d.x[2] = i(p.h, "H");
  d.x[3] = i(p.w, "W");
  d.w[0] = i(p.k, "K");
  d.w[1] = i(p.c_per_group(), "C/groups");
  d.w[2] = i(p.r, "R");
  d.w[3] = i(p.s, "S");
  d.y[0] = d.x[0];
  d.y[1] = d.w[0];
  d.y[2] = i(p.p(), "P");
  d.y[3] = i(p.q(), "Q");
  d.bias[0] = 1;
  d.bias[1] = d.w[0];
  d.bias[2] = 1;
  d.bias[3] = 1;
  d.pad[0] = i(p.pad_h, "pad_h");
  d.pad[1] = i(p.pad_w, "pad_w");
  d.stride[0] = i(p.stride_h, "stride_h");
  d.stride[1] = i(p.stride_w, "stride_w");
  d.dilation[0] = i(p.dil_h, "dil_h");
  d.dilation[1] = i(p.dil_w, "dil_w");
  d.groups = i(p.groups, "groups");
  // cuDNN indexes tensors with int strides: the largest tensor must stay below 2^31 elements.
  const double largest = std::max({static_cast<double>(p.n) * p.c * p.h * p.w,
                                   static_cast<double>(p.n) * p.k * p.p() * p.q(),
                                   static_cast<double>(p.k) * p.c_per_group() * p.r * p.s});
  ANVIL_CHECK(largest <= static_cast<double>(std::numeric_limits<int>::max()), where,
              "a tensor of ", largest, " elements is beyond cuDNN's int strides in ", p.repr());
  return d;
}

Support cudnn_basic_support(const ConvProblem& p, bool tf32) {
  if (p.dtype != DType::f32 && p.dtype != DType::f64)
    return Support::no(
        detail::str_cat("cuDNN convolution needs f32 or f64, got ", dtype_name(p.dtype)));
  if (tf32 && p.dtype != DType::f32)
    return Support::no("TF32 applies to f32 only; f64 runs on cuda.cudnn");
  if (p.fuse_relu) {
    if (p.pass != ConvPass::forward) return Support::no("a fused ReLU exists only in the forward");
    if (!p.has_bias)
      return Support::no(
          "fused ReLU needs a bias (cudnnConvolutionBiasActivationForward); the op layer "
          "applies ReLU separately");
    if (p.dtype != DType::f32) return Support::no("fused bias + ReLU is used for f32 only");
  }
  try {
    (void)cudnn_conv_dims(p, "cuda.cudnn");
  } catch (const Error& e) {
    return Support::no(e.what());
  }
  return Support::yes();
}

std::string cudnn_accuracy_refusal(const ConvProblem& p, int value) {
  const bool winograd = value == cudnn_algo_value(CudnnConvAlgo::winograd, p.pass) ||
                        value == cudnn_algo_value(CudnnConvAlgo::winograd_nonfused, p.pass);
  if (!winograd || p.dtype != DType::f32 || (p.r <= 3 && p.s <= 3)) return {};
  return detail::str_cat(
      cudnn_algo_enum_name(p.pass, value), " on a ", p.r, "x", p.s,
      " f32 filter: cuDNN's Winograd was measured up to 4.6 % off ref on filters "
      "above 3x3 (Note [Winograd on large filters])");
}

std::string cudnn_refusal(const ConvProblem& p, CudnnConvAlgo algo, const std::string& status) {
  return detail::str_cat("cuDNN reports ", status, " for ",
                         cudnn_algo_enum_name(p.pass, cudnn_algo_value(algo, p.pass)), " (",
                         cudnn_variant_name(algo), ", ", conv_pass_name(p.pass), ")");
}

CudnnConvKey cudnn_conv_key(const ConvProblem& p, bool tf32) {
  CudnnConvKey k{p, tf32};
  k.problem.fuse_relu = false;
  return k;
}

std::string cudnn_math_name(CudnnMath m) {
  switch (m) {
    case CudnnMath::default_math:
      return "CUDNN_DEFAULT_MATH";
    case CudnnMath::tensor_op:
      return "CUDNN_TENSOR_OP_MATH";
    case CudnnMath::tensor_op_allow_conversion:
      return "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION";
    case CudnnMath::fma:
      return "CUDNN_FMA_MATH";
  }
  return detail::str_cat("CUDNN_MATH_", static_cast<int>(m), "?");
}

CudnnMath cudnn_search_math(DType dtype, bool tf32) {
  if (dtype == DType::f64) return CudnnMath::default_math;
  return tf32 ? CudnnMath::tensor_op : CudnnMath::fma;
}

std::optional<CudnnMath> cudnn_run_math(CudnnMath timed, DType dtype, bool tf32) {
  // See Note [cuDNN math type of the timed algorithm]
  const bool known = timed == CudnnMath::default_math || timed == CudnnMath::tensor_op ||
                     timed == CudnnMath::tensor_op_allow_conversion || timed == CudnnMath::fma;
  if (!known) return std::nullopt;
  switch (dtype) {
    case DType::f32:
      if (tf32) return timed;
      if (timed == CudnnMath::tensor_op || timed == CudnnMath::tensor_op_allow_conversion)
        return std::nullopt;
      return CudnnMath::fma;  // DEFAULT would let cuDNN use TF32 again on Ampere and later
    case DType::f64:
      if (timed == CudnnMath::tensor_op_allow_conversion) return std::nullopt;
      return timed;
    default:
      return std::nullopt;
  }
}

std::size_t cudnn_workspace_cap(const std::string& env_mb, std::optional<std::size_t> available) {
  // See Note [cuDNN workspace cap]
  if (env_mb.empty()) return available ? *available / 2 : kCudnnWorkspaceFallbackBytes;
  const auto parsed = parse_number<long long>(env_mb);
  const long long mb = parsed.value_or(-1);
  ANVIL_CHECK(mb >= 0 && mb <= (1LL << 24), "ANVIL_CUDNN_WORKSPACE_MB",
              "expected a number of MiB in [0, 2^24], got '", env_mb, "'");
  const std::size_t bytes = static_cast<std::size_t>(mb) << 20;
  return available ? std::min(bytes, *available) : bytes;
}

std::size_t cudnn_workspace_cap_bytes(std::optional<std::size_t> available) {
  return cudnn_workspace_cap(env_or_empty("ANVIL_CUDNN_WORKSPACE_MB"), available);
}

const CudnnChoice* cudnn_find_choice(const CudnnConvKey& key) { return store().find(key); }

const CudnnChoice& cudnn_record_choice(const CudnnConvKey& key, CudnnChoice choice) {
  const auto [stored, inserted] =
      store().insert(key, std::make_unique<const CudnnChoice>(std::move(choice)));
  if (inserted && env_or_empty("ANVIL_CUDNN_LOG") == "1") {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.4f", stored->ms);
    std::cerr << "cuda.cudnn: " << stored->problem << " -> " << stored->algo_name << " "
              << cudnn_math_name(stored->math) << " (" << ms << " ms, workspace "
              << (stored->workspace >> 20) << " MiB of " << (stored->workspace_cap >> 20)
              << " MiB; " << stored->candidates << ")\n";
  }
  return *stored;
}

std::vector<CudnnChoice> cudnn_choices() {
  std::vector<CudnnChoice> out;
  store().for_each([&](const CudnnConvKey&, const CudnnChoice& c) { out.push_back(c); });
  std::sort(out.begin(), out.end(),
            [](const CudnnChoice& a, const CudnnChoice& b) { return a.problem < b.problem; });
  return out;
}

void cudnn_clear_choices() { store().forget_all(); }

std::string cudnn_default_label(const ConvProblem& p, bool tf32) {
  const std::string base = tf32 ? kCudnnTf32Variant : kCudnnDefaultVariant;
  const CudnnChoice* c = cudnn_find_choice(cudnn_conv_key(p, tf32));
  return c ? base + "[" + c->algo_name + "]" : base;
}

}  // namespace anvil::kernels
