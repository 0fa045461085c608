// SPDX-License-Identifier: Apache-2.0
// conv2d through cuDNN 9's legacy convolution API, NCHW / KCRS, all three passes:
//   cuda.cudnn            default: the fastest algorithm of cudnnFind*AlgorithmEx per problem,
//                         searched once under the workspace cap and cached (dispatch log:
//                         ANVIL_CUDNN_LOG=1); IEEE FP32 (CUDNN_FMA_MATH), f64
//   cuda.cudnn.tf32       the same search with TF32 tensor-core math; opt-in (forced by name only)
//   cuda.cudnn.<family>   one algorithm family each (Note [cuDNN algorithm families],
//                         kernels/cudnn_conv_plan.h), declining with cuDNN's status when cuDNN
//                         does not support the problem
// Bias: cudnnAddTensor after the forward, cudnnConvolutionBackwardBias beside the filter
// gradient; a fused forward ReLU (f32 with bias) is cudnnConvolutionBiasActivationForward.
//
// Note [Legacy cuDNN API]
// cuDNN 9 marks the descriptor-based convolution calls deprecated in favour of the graph API,
// but they remain in libcudnn_cnn and are the only calls that name one algorithm per pass, which
// is what a variant per algorithm needs. The deprecation warnings are silenced for this file only.
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/allocator.h"
#include "engine/core/config.h"
#include "engine/core/error.h"
#include "engine/core/tensor.h"
#include "engine/dispatch/conv_problem.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cudnn_handle.h"
#include "kernels/cuda/device_guard.h"
#include "kernels/cuda/register.h"
#include "kernels/cudnn_conv_plan.h"
#include "kernels/stable_cache.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // Note [Legacy cuDNN API]

namespace anvil::cuda {
namespace {

using kernels::CudnnChoice;
using kernels::CudnnConvAlgo;
using kernels::CudnnConvKey;
using kernels::CudnnMath;

// The enum values of kernels/cudnn_conv_plan.cpp are cuDNN's.
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM == 0 &&
              CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM == 1 &&
              CUDNN_CONVOLUTION_FWD_ALGO_GEMM == 2 && CUDNN_CONVOLUTION_FWD_ALGO_DIRECT == 3 &&
              CUDNN_CONVOLUTION_FWD_ALGO_FFT == 4 && CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING == 5 &&
              CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD == 6 &&
              CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED == 7 &&
              CUDNN_CONVOLUTION_FWD_ALGO_COUNT == 8);
static_assert(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 == 0 && CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 == 1 &&
              CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT == 2 &&
              CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING == 3 &&
              CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD == 4 &&
              CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED == 5 &&
              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT == 6);
static_assert(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 == 0 &&
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 == 1 &&
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT == 2 &&
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3 == 3 &&
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD == 4 &&
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED == 5 &&
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING == 6 &&
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT == 7);
// So are the math types (Note [cuDNN math type of the timed algorithm]).
static_assert(static_cast<int>(CudnnMath::default_math) == CUDNN_DEFAULT_MATH &&
              static_cast<int>(CudnnMath::tensor_op) == CUDNN_TENSOR_OP_MATH &&
              static_cast<int>(CudnnMath::tensor_op_allow_conversion) ==
                  CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
              static_cast<int>(CudnnMath::fma) == CUDNN_FMA_MATH);

// ---- descriptors (RAII) -----------------------------------------------------------------------

struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc() { ANVIL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d)); }
  ~TensorDesc() { (void)cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};
struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc() { ANVIL_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d)); }
  ~FilterDesc() { (void)cudnnDestroyFilterDescriptor(d); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};
struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc() { ANVIL_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d)); }
  ~ConvDesc() { (void)cudnnDestroyConvolutionDescriptor(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};
struct ActivationDesc {
  cudnnActivationDescriptor_t d = nullptr;
  ActivationDesc() { ANVIL_CUDNN_CHECK(cudnnCreateActivationDescriptor(&d)); }
  ~ActivationDesc() { (void)cudnnDestroyActivationDescriptor(d); }
  ActivationDesc(const ActivationDesc&) = delete;
  ActivationDesc& operator=(const ActivationDesc&) = delete;
};

cudnnDataType_t data_type(DType d) {
  return d == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

cudnnMathType_t to_cudnn(CudnnMath m) { return static_cast<cudnnMathType_t>(m); }

// IEEE FP32 unless TF32 was asked for: CUDNN_DEFAULT_MATH would let cuDNN use TF32 tensor cores
// for float data on Ampere and later, CUDNN_FMA_MATH restricts it to FMA kernels. f64 keeps the
// default (there is no reduced-precision double math).
cudnnMathType_t math_type(const ConvProblem& p, bool tf32) {
  return to_cudnn(kernels::cudnn_search_math(p.dtype, tf32));
}

// x [N, C, H, W], y [N, K, P, Q] (also dx / dy), w [K, C/groups, R, S] (also dw), bias
// [1, K, 1, 1] (also db), the convolution itself, and for a forward that may fuse the ReLU
// (f32 with a bias) the activation. Created once per problem and cached beside its choice
// (Note [Stable cache entries]); after construction only read: cuDNN's execution calls take
// descriptors as inputs and do not modify them.
struct ConvDescs {
  TensorDesc x, y, bias;
  FilterDesc w;
  ConvDesc conv;
  std::unique_ptr<ActivationDesc> relu;
  ConvDescs(const ConvProblem& p, cudnnMathType_t math) {
    const kernels::CudnnConvDims d = kernels::cudnn_conv_dims(p, "cuda.cudnn");
    const cudnnDataType_t t = data_type(p.dtype);
    ANVIL_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(x.d, CUDNN_TENSOR_NCHW, t, d.x[0], d.x[1], d.x[2], d.x[3]));
    ANVIL_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(y.d, CUDNN_TENSOR_NCHW, t, d.y[0], d.y[1], d.y[2], d.y[3]));
    ANVIL_CUDNN_CHECK(cudnnSetTensor4dDescriptor(bias.d, CUDNN_TENSOR_NCHW, t, d.bias[0], d.bias[1],
                                                 d.bias[2], d.bias[3]));
    ANVIL_CUDNN_CHECK(
        cudnnSetFilter4dDescriptor(w.d, t, CUDNN_TENSOR_NCHW, d.w[0], d.w[1], d.w[2], d.w[3]));
    // Cross-correlation, as every framework (and ref) computes; the compute type is the data
    // type (f32 accumulates in f32 as the CPU variants do, f64 in f64).
    ANVIL_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv.d, d.pad[0], d.pad[1], d.stride[0],
                                                      d.stride[1], d.dilation[0], d.dilation[1],
                                                      CUDNN_CROSS_CORRELATION, t));
    ANVIL_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv.d, d.groups));
    ANVIL_CUDNN_CHECK(cudnnSetConvolutionMathType(conv.d, math));
    // cuDNN's output size must be anvil's (a mismatch would be a descriptor bug).
    int n = 0, k = 0, pp = 0, q = 0;
    ANVIL_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv.d, x.d, w.d, &n, &k, &pp, &q));
    ANVIL_CHECK(n == d.y[0] && k == d.y[1] && pp == d.y[2] && q == d.y[3], "cuda.cudnn",
                "cuDNN's output [", n, ',', k, ',', pp, ',', q, "] differs from anvil's [", d.y[0],
                ',', d.y[1], ',', d.y[2], ',', d.y[3], "] for ", p.repr());
    if (p.pass == ConvPass::forward && p.has_bias && p.dtype == DType::f32) {
      relu = std::make_unique<ActivationDesc>();
      ANVIL_CUDNN_CHECK(
          cudnnSetActivationDescriptor(relu->d, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
    }
  }
};

cudnnStatus_t workspace_size(cudnnHandle_t h, const ConvDescs& d, ConvPass pass, int algo,
                             std::size_t* bytes) {
  switch (pass) {
    case ConvPass::forward:
      return cudnnGetConvolutionForwardWorkspaceSize(
          h, d.x.d, d.w.d, d.conv.d, d.y.d, static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes);
    case ConvPass::backward_data:
      return cudnnGetConvolutionBackwardDataWorkspaceSize(
          h, d.w.d, d.y.d, d.conv.d, d.x.d, static_cast<cudnnConvolutionBwdDataAlgo_t>(algo),
          bytes);
    case ConvPass::backward_weights:
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(
          h, d.x.d, d.y.d, d.conv.d, d.w.d, static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo),
          bytes);
  }
  return CUDNN_STATUS_BAD_PARAM;
}

// Device scratch from the caching allocator (stream-ordered: every user is on anvil's stream).
Tensor workspace(std::size_t bytes, Device device) {
  return Tensor::empty({static_cast<std::int64_t>((bytes + 7) / 8)}, DType::i64, device);
}

// alpha = 1 and beta = 0 in the data type's scaling type (double for f64, float otherwise).
struct Scalars {
  float f1 = 1.0f, f0 = 0.0f;
  double d1 = 1.0, d0 = 0.0;
  bool dbl;
  explicit Scalars(DType t) : dbl(t == DType::f64) {}
  const void* one() const { return dbl ? static_cast<const void*>(&d1) : &f1; }
  const void* zero() const { return dbl ? static_cast<const void*>(&d0) : &f0; }
};

// Bytes a workspace allocation on `device` can get: the device's free memory plus the blocks
// anvil's allocator caches (Note [cuDNN workspace cap]); nullopt when CUDA cannot tell.
std::optional<std::size_t> available_bytes(int device) {
  DeviceGuard guard(device);  // cudaMemGetInfo reports the current device
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  const MemoryStats st = memory_stats(Device::cuda(device));
  return free_bytes + static_cast<std::size_t>(std::max<std::int64_t>(st.reserved - st.current, 0));
}

// Runs algorithm `algo` (cuDNN's value for the problem's pass) with `ws_bytes` of workspace on the
// problem's cached descriptors `d`, whose convolution carries the math type to run with.
void run_algo(const ConvArgs& a, const ConvDescs& d, int algo, std::size_t ws_bytes) {
  const ConvProblem& p = a.problem;
  const int dev = p.device.index;
  cudaStream_t s = stream(dev);
  DeviceGuard guard(dev);
  cudnnHandle_t h = cudnn_handle(dev);
  const Tensor ws = workspace(ws_bytes, p.device);
  void* wsp = ws_bytes > 0 ? ws.data_ptr() : nullptr;
  const Scalars sc(p.dtype);
  switch (p.pass) {
    case ConvPass::forward: {
      const auto fa = static_cast<cudnnConvolutionFwdAlgo_t>(algo);
      if (p.fuse_relu) {  // f32 with a bias (cudnn_basic_support)
        ANVIL_CHECK(a.b != nullptr && d.relu != nullptr, "cuda.cudnn",
                    "fused ReLU without a bias in ", p.repr());
        const cudnnActivationDescriptor_t act = d.relu->d;
        // y = relu(1 * conv(x) + 0 * z + bias) with z = y: z is zeroed first so that the
        // uninitialised output cannot contribute NaN * 0.
        const std::size_t y_bytes =
            static_cast<std::size_t>(p.n) * p.k * p.p() * p.q() * dtype_size(p.dtype);
        ANVIL_CUDA_CHECK(cudaMemsetAsync(a.y, 0, y_bytes, s));
        const cudnnStatus_t st = cudnnConvolutionBiasActivationForward(
            h, sc.one(), d.x.d, a.x, d.w.d, a.w, d.conv.d, fa, wsp, ws_bytes, sc.zero(), d.y.d, a.y,
            d.bias.d, a.b, act, d.y.d, a.y);
        if (st == CUDNN_STATUS_SUCCESS) return;
        // Not every algorithm has a fused kernel (CUDNN_STATUS_NOT_SUPPORTED), and the workspace
        // was sized for the plain convolution: the same three steps apart, in place (a real
        // argument error shows up in them with its own message).
        ANVIL_CUDNN_CHECK(cudnnConvolutionForward(h, sc.one(), d.x.d, a.x, d.w.d, a.w, d.conv.d, fa,
                                                  wsp, ws_bytes, sc.zero(), d.y.d, a.y));
        ANVIL_CUDNN_CHECK(cudnnAddTensor(h, sc.one(), d.bias.d, a.b, sc.one(), d.y.d, a.y));
        ANVIL_CUDNN_CHECK(
            cudnnActivationForward(h, act, sc.one(), d.y.d, a.y, sc.zero(), d.y.d, a.y));
        return;
      }
      ANVIL_CUDNN_CHECK(cudnnConvolutionForward(h, sc.one(), d.x.d, a.x, d.w.d, a.w, d.conv.d, fa,
                                                wsp, ws_bytes, sc.zero(), d.y.d, a.y));
      if (p.has_bias)  // y += bias broadcast over N, P, Q
        ANVIL_CUDNN_CHECK(cudnnAddTensor(h, sc.one(), d.bias.d, a.b, sc.one(), d.y.d, a.y));
      return;
    }
    case ConvPass::backward_data:
      ANVIL_CUDNN_CHECK(cudnnConvolutionBackwardData(
          h, sc.one(), d.w.d, a.w, d.y.d, a.dy, d.conv.d,
          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), wsp, ws_bytes, sc.zero(), d.x.d, a.dx));
      return;
    case ConvPass::backward_weights:
      ANVIL_CUDNN_CHECK(
          cudnnConvolutionBackwardFilter(h, sc.one(), d.x.d, a.x, d.y.d, a.dy, d.conv.d,
                                         static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), wsp,
                                         ws_bytes, sc.zero(), d.w.d, a.dw));
      if (p.has_bias && a.db != nullptr)
        ANVIL_CUDNN_CHECK(
            cudnnConvolutionBackwardBias(h, sc.one(), d.y.d, a.dy, sc.zero(), d.bias.d, a.db));
      return;
  }
}

// ---- one algorithm family --------------------------------------------------------------------

// Whether cuDNN supports the family's algorithm for a problem and with how much workspace, and the
// problem's descriptors (IEEE math) when it does; one immutable entry per (problem, family).
struct FamilyEntry {
  Support support;
  std::size_t workspace = 0;
  std::unique_ptr<const ConvDescs> descs;  // null when not supported
};
struct FamilyKey {
  CudnnConvKey key;
  CudnnConvAlgo algo;
  bool operator==(const FamilyKey&) const = default;
  auto fields() const { return std::tuple_cat(key.fields(), std::tie(algo)); }
};
using FamilyKeyHash = ProblemHasher;  // Note [Problem fields]

// Asked once per problem and family (cudnnGetConvolution*WorkspaceSize answers
// CUDNN_STATUS_NOT_SUPPORTED for an algorithm that cannot run the configuration); the workspace
// cap is the one of that moment (Note [cuDNN workspace cap]).
const FamilyEntry& family_entry(CudnnConvAlgo algo, const ConvProblem& p) {
  static auto* cache = new kernels::StableCache<FamilyKey, FamilyEntry, FamilyKeyHash>();
  const FamilyKey key{kernels::cudnn_conv_key(p, false), algo};
  if (const FamilyEntry* e = cache->find(key)) return *e;
  const ConvProblem& q = key.key.problem;
  auto entry = std::make_unique<FamilyEntry>();
  const int dev = q.device.index;
  DeviceGuard guard(dev);
  cudnnHandle_t h = cudnn_handle(dev);
  auto descs = std::make_unique<const ConvDescs>(q, math_type(q, false));
  const int value = kernels::cudnn_algo_value(algo, q.pass);
  const cudnnStatus_t st = workspace_size(h, *descs, q.pass, value, &entry->workspace);
  const std::size_t cap = kernels::cudnn_workspace_cap_bytes(available_bytes(dev));
  if (st != CUDNN_STATUS_SUCCESS)
    entry->support = Support::no(kernels::cudnn_refusal(q, algo, cudnn_status_text(st)));
  else if (entry->workspace > cap)
    entry->support = Support::no(
        detail::str_cat(kernels::cudnn_algo_enum_name(q.pass, value), " needs ",
                        entry->workspace >> 20, " MiB of workspace, above the cap of ", cap >> 20,
                        " MiB (ANVIL_CUDNN_WORKSPACE_MB, Note [cuDNN workspace cap])"));
  else
    entry->descs = std::move(descs);
  return *cache->insert(key, std::move(entry)).first;
}

Support family_support(CudnnConvAlgo algo, const ConvProblem& p) {
  Support basic = kernels::cudnn_basic_support(p, false);
  if (!basic.ok) return basic;
  const std::string inaccurate =
      kernels::cudnn_accuracy_refusal(p, kernels::cudnn_algo_value(algo, p.pass));
  if (!inaccurate.empty()) return Support::no(inaccurate);
  try {
    return family_entry(algo, p).support;
  } catch (const Error& e) {  // e.g. no device, or cuDNN missing at run time
    return Support::no(e.what());
  }
}

void run_family(CudnnConvAlgo algo, const ConvArgs& a) {
  const FamilyEntry& e = family_entry(algo, a.problem);
  if (!e.support.ok) fail(kernels::cudnn_variant_name(algo).c_str(), e.support.reason);
  run_algo(a, *e.descs, kernels::cudnn_algo_value(algo, a.problem.pass), e.workspace);
}

// ---- the default: cudnnFind*AlgorithmEx once per problem -------------------------------------

// The largest workspace any algorithm of the pass needs, up to `cap` (cuDNN's search then tries
// every algorithm that fits, and the allocation is no larger than something will use).
std::size_t search_workspace(cudnnHandle_t h, const ConvDescs& d, ConvPass pass, std::size_t cap) {
  const int count = pass == ConvPass::forward ? static_cast<int>(CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
                    : pass == ConvPass::backward_data
                        ? static_cast<int>(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT)
                        : static_cast<int>(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
  std::size_t most = 0;
  for (int algo = 0; algo < count; ++algo) {
    std::size_t bytes = 0;
    if (workspace_size(h, d, pass, algo, &bytes) == CUDNN_STATUS_SUCCESS && bytes <= cap)
      most = std::max(most, bytes);
  }
  return most;
}

// The fastest result cuDNN measured that this run may take, with the math type to run it with
// (Note [cuDNN math type of the timed algorithm]); `perf` is in cuDNN's order (fastest first).
template <typename Perf>
CudnnChoice choose(const ConvProblem& p, bool tf32, const std::vector<Perf>& perf,
                   std::size_t ws_bytes) {
  CudnnChoice best;
  std::string tried;
  for (const Perf& r : perf) {
    const std::string name = kernels::cudnn_algo_enum_name(p.pass, static_cast<int>(r.algo));
    const std::string shortname = name.substr(name.rfind("ALGO_") + 5);
    if (!tried.empty()) tried += ", ";
    if (r.status != CUDNN_STATUS_SUCCESS) {
      tried += shortname + ": " + cudnn_status_text(r.status);
      continue;
    }
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.4f", static_cast<double>(r.time));
    tried += shortname + " " + ms + " ms";
    const auto timed = static_cast<CudnnMath>(r.mathType);
    if (timed != kernels::cudnn_search_math(p.dtype, tf32)) {
      tried += ' ';  // (not " " + name: GCC 12's -Wrestrict misfires on it)
      tried += kernels::cudnn_math_name(timed);
    }
    // IEEE runs never take a tensor-op (TF32) result; TF32 runs may take either.
    const std::optional<CudnnMath> run = kernels::cudnn_run_math(timed, p.dtype, tf32);
    if (!run) {
      tried += " (skipped)";
      continue;
    }
    if (!kernels::cudnn_accuracy_refusal(p, static_cast<int>(r.algo)).empty()) {
      tried += " (Winograd on a filter above 3x3, skipped)";  // Note [Winograd on large filters]
      continue;
    }
    if (r.memory > ws_bytes) continue;
    if (best.algo < 0 || r.time < best.ms) {
      best.algo = static_cast<int>(r.algo);
      best.ms = static_cast<double>(r.time);
      best.workspace = r.memory;
      best.timed_math = timed;
      best.math = *run;
    }
  }
  best.candidates = tried;
  best.problem = p.repr() + (tf32 ? " tf32" : "");
  ANVIL_CHECK(best.algo >= 0, tf32 ? kernels::kCudnnTf32Variant : kernels::kCudnnDefaultVariant,
              "no cuDNN algorithm ran ", p.repr(), " within ", ws_bytes >> 20,
              " MiB of workspace: ", tried);
  best.algo_name = kernels::cudnn_algo_enum_name(p.pass, best.algo);
  return best;
}

// Measures every algorithm of the pass on the call's own buffers (outputs are overwritten, and
// recomputed by the caller afterwards) and caches the fastest with the problem's descriptors,
// whose convolution then carries the winner's math type. Runs once per key; strings are built
// here only.
const CudnnChoice& search(const ConvArgs& a, bool tf32, const CudnnConvKey& key) {
  const ConvProblem& p = key.problem;  // the call's problem without the fused ReLU
  const int dev = p.device.index;
  DeviceGuard guard(dev);
  cudnnHandle_t h = cudnn_handle(dev);
  auto descs = std::make_shared<ConvDescs>(p, math_type(p, tf32));
  const ConvDescs& d = *descs;
  const std::size_t cap = kernels::cudnn_workspace_cap_bytes(available_bytes(dev));
  const std::size_t ws_bytes = search_workspace(h, d, p.pass, cap);
  const Tensor ws = workspace(ws_bytes, p.device);
  void* wsp = ws_bytes > 0 ? ws.data_ptr() : nullptr;
  // Room for every result cuDNN may return (cudnnGetConvolution*AlgorithmMaxCount), not just one
  // per algorithm: the count is cuDNN's to choose.
  int max_count = 0, returned = 0;
  CudnnChoice c;
  switch (p.pass) {
    case ConvPass::forward: {
      ANVIL_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<std::size_t>(max_count));
      ANVIL_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, d.x.d, a.x, d.w.d, a.w, d.conv.d,
                                                               d.y.d, a.y, max_count, &returned,
                                                               perf.data(), wsp, ws_bytes));
      perf.resize(static_cast<std::size_t>(returned));
      c = choose(p, tf32, perf, ws_bytes);
      break;
    }
    case ConvPass::backward_data: {
      ANVIL_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<std::size_t>(max_count));
      ANVIL_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
          h, d.w.d, a.w, d.y.d, a.dy, d.conv.d, d.x.d, a.dx, max_count, &returned, perf.data(), wsp,
          ws_bytes));
      perf.resize(static_cast<std::size_t>(returned));
      c = choose(p, tf32, perf, ws_bytes);
      break;
    }
    case ConvPass::backward_weights: {
      ANVIL_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max_count));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<std::size_t>(max_count));
      ANVIL_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
          h, d.x.d, a.x, d.y.d, a.dy, d.conv.d, d.w.d, a.dw, max_count, &returned, perf.data(), wsp,
          ws_bytes));
      perf.resize(static_cast<std::size_t>(returned));
      c = choose(p, tf32, perf, ws_bytes);
      break;
    }
  }
  // Note [cuDNN math type of the timed algorithm]: the winner runs with its own math type.
  ANVIL_CUDNN_CHECK(cudnnSetConvolutionMathType(descs->conv.d, to_cudnn(c.math)));
  c.workspace_cap = cap;
  c.descriptors = std::move(descs);
  return kernels::cudnn_record_choice(key, std::move(c));
}

// The hot path: one lookup by a plain struct, then the cached descriptors.
void run_default(const ConvArgs& a, bool tf32) {
  const CudnnConvKey key = kernels::cudnn_conv_key(a.problem, tf32);
  const CudnnChoice* c = kernels::cudnn_find_choice(key);
  if (c == nullptr) c = &search(a, tf32, key);
  run_algo(a, *static_cast<const ConvDescs*>(c->descriptors.get()), c->algo, c->workspace);
}

// "9.19.0" of the libcudnn loaded at run time (cudnnGetVersion: major * 10000 + minor * 100 +
// patch since cuDNN 9), and the headers' version when it differs.
std::string cudnn_version() {
  const std::size_t v = cudnnGetVersion();
  std::string text = detail::str_cat(v / 10000, ".", v / 100 % 100, ".", v % 100);
  if (v != static_cast<std::size_t>(CUDNN_VERSION))
    text +=
        detail::str_cat(" (built with ", CUDNN_MAJOR, ".", CUDNN_MINOR, ".", CUDNN_PATCHLEVEL, ")");
  return text;
}

// The tags of a family (Note [Variant tags]): the two whose backward algorithms accumulate with
// atomics are nondeterministic (Note [cuDNN algorithm families]); every family but the implicit
// GEMM may ask for a workspace (cudnnGet*WorkspaceSize, per problem).
std::vector<std::string> family_tags(CudnnConvAlgo algo) {
  const std::string name = kernels::cudnn_variant_name(algo);
  if (name == "cuda.cudnn.implicit_gemm") return {kTagNondeterministic};
  if (name == "cuda.cudnn.implicit_precomp_gemm") return {kTagNondeterministic, kTagWorkspace};
  return {kTagWorkspace};
}

}  // namespace

void register_cuda_conv() {
  add_library_version("cuDNN", cudnn_version());
  conv_table().add({
      .name = kernels::kCudnnDefaultVariant,
      .device = DeviceType::cuda,
      .supports = [](const ConvProblem& p) { return kernels::cudnn_basic_support(p, false); },
      .fn = [](const ConvArgs& a) { run_default(a, false); },
      .description = "cuDNN, the fastest algorithm of cudnnFind*AlgorithmEx per problem "
                     "(cached), IEEE FP32 (CUDNN_FMA_MATH) or f64",
      // The search may pick any algorithm, the atomic ones too (Note [Variant tags]).
      .tags = {kTagNondeterministic, kTagWorkspace},
  });
  conv_table().add({
      .name = kernels::kCudnnTf32Variant,
      .device = DeviceType::cuda,
      .supports = [](const ConvProblem& p) { return kernels::cudnn_basic_support(p, true); },
      .fn = [](const ConvArgs& a) { run_default(a, true); },
      .description = "cuda.cudnn with TF32 tensor-core math (CUDNN_TENSOR_OP_MATH); opt-in",
      .opt_in = true,
      .tags = {kTagTf32, kTagNondeterministic, kTagWorkspace},
  });
  for (CudnnConvAlgo algo : kernels::kCudnnConvAlgos) {
    conv_table().add({
        .name = kernels::cudnn_variant_name(algo),
        .device = DeviceType::cuda,
        .supports = [algo](const ConvProblem& p) { return family_support(algo, p); },
        .fn = [algo](const ConvArgs& a) { run_family(algo, a); },
        .description = detail::str_cat(
            "cuDNN ",
            kernels::cudnn_algo_enum_name(ConvPass::forward,
                                          kernels::cudnn_algo_value(algo, ConvPass::forward)),
            " / ",
            kernels::cudnn_algo_enum_name(ConvPass::backward_data,
                                          kernels::cudnn_algo_value(algo, ConvPass::backward_data)),
            " / ",
            kernels::cudnn_algo_enum_name(
                ConvPass::backward_weights,
                kernels::cudnn_algo_value(algo, ConvPass::backward_weights)),
            ", IEEE FP32 or f64"),
        .tags = family_tags(algo),
    });
  }
}

}  // namespace anvil::cuda
