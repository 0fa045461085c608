// SPDX-License-Identifier: Apache-2.0
#pragma once
// The pure logic of the cuDNN conv2d variants (kernels/cuda/conv_cudnn.cpp), without any CUDA or
// cuDNN header, so it is compiled into libanvil and unit-tested on machines without a GPU
// (tests/test_cudnn_conv_plan.cpp): variant names, the algorithm of each pass per variant (as
// cuDNN's enum values; conv_cudnn.cpp static_asserts them against cudnn_ops.h), the descriptor
// parameters of a ConvProblem, refusal messages, the problem key of the find cache, the math
// type rule, the workspace cap, and the cache of the default's choices, which doubles as its
// dispatch log.
//
// Note [cuDNN algorithm families]
// cuDNN numbers its algorithms per pass. One variant is one family, with the algorithm of each
// pass that does the same kind of work:
//   variant                          forward (FWD_ALGO_)      backward data      backward filter
//   cuda.cudnn.implicit_gemm         IMPLICIT_GEMM (0)        ALGO_0 (0)*        ALGO_0 (0)*
//   cuda.cudnn.implicit_precomp_gemm IMPLICIT_PRECOMP_GEMM (1) ALGO_1 (1)       ALGO_3 (3)*
//   cuda.cudnn.gemm                  GEMM (2)                 ALGO_1 (1)         ALGO_1 (1)
//   cuda.cudnn.fft                   FFT (4)                  FFT (2)            FFT (2)
//   cuda.cudnn.fft_tiling            FFT_TILING (5)           FFT_TILING (3)     FFT_TILING (6)
//   cuda.cudnn.winograd              WINOGRAD (6)             WINOGRAD (4)       WINOGRAD_NONFUSED
//   (5)+ cuda.cudnn.winograd_nonfused     WINOGRAD_NONFUSED (7)    WINOGRAD_NONFUSED (5)
//   WINOGRAD_NONFUSED (5)
// * non-deterministic in cuDNN (atomic accumulation): results may differ in the last bits from
//   run to run. + cuDNN's fused BWD_FILTER_ALGO_WINOGRAD is "not implemented" (cudnn_ops.h), so
//   the winograd family uses the non-fused one for the filter gradient.
// FWD_ALGO_DIRECT (3) is not registered: cuDNN does not implement it ("not implemented" on every
// problem), and a variant that declines every problem is not a variant.
// The default, cuda.cudnn, measures every algorithm of the pass with cudnnFind*AlgorithmEx once
// per problem key (CudnnConvKey) under the workspace cap (Note [cuDNN workspace cap]) and caches
// the fastest with its math type (Note [cuDNN math type of the timed algorithm]).
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/dispatch/conv_problem.h"
#include "engine/dispatch/problem_fields.h"
#include "engine/dispatch/selection.h"

namespace anvil::kernels {

enum class CudnnConvAlgo {
  implicit_gemm,
  implicit_precomp_gemm,
  gemm,
  fft,
  fft_tiling,
  winograd,
  winograd_nonfused,
};
inline constexpr int kCudnnConvAlgoCount = 7;
inline constexpr CudnnConvAlgo kCudnnConvAlgos[kCudnnConvAlgoCount] = {
    CudnnConvAlgo::implicit_gemm,
    CudnnConvAlgo::implicit_precomp_gemm,
    CudnnConvAlgo::gemm,
    CudnnConvAlgo::fft,
    CudnnConvAlgo::fft_tiling,
    CudnnConvAlgo::winograd,
    CudnnConvAlgo::winograd_nonfused};

inline constexpr const char* kCudnnDefaultVariant = "cuda.cudnn";
inline constexpr const char* kCudnnTf32Variant = "cuda.cudnn.tf32";

// "implicit_gemm".
const char* cudnn_algo_name(CudnnConvAlgo algo);
// "cuda.cudnn.implicit_gemm".
std::string cudnn_variant_name(CudnnConvAlgo algo);
// The family of a variant name (nullopt for cuda.cudnn, cuda.cudnn.tf32 and anything else).
std::optional<CudnnConvAlgo> cudnn_algo_from_variant(const std::string& name);
// cuDNN's enum value of the family's algorithm for `pass` (Note [cuDNN algorithm families]):
// cudnnConvolutionFwdAlgo_t, cudnnConvolutionBwdDataAlgo_t or cudnnConvolutionBwdFilterAlgo_t.
int cudnn_algo_value(CudnnConvAlgo algo, ConvPass pass);
// cuDNN's name of enum value `value` of `pass` ("CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT"), or
// "CUDNN_..._ALGO_<value>?" when out of range.
std::string cudnn_algo_enum_name(ConvPass pass, int value);

// The legacy cuDNN descriptors of a problem: NCHW tensors x, y (and bias [1, K, 1, 1]), a KCRS
// filter [K, C/groups, R, S], 2-D padding, stride and dilation, the group count.
struct CudnnConvDims {
  int x[4] = {}, w[4] = {}, y[4] = {}, bias[4] = {};
  int pad[2] = {}, stride[2] = {}, dilation[2] = {};
  int groups = 1;
};
// Throws anvil::Error naming `where` when an extent does not fit cuDNN's int arguments.
CudnnConvDims cudnn_conv_dims(const ConvProblem& p, const char* where);

// What every cuDNN conv variant can do, before asking cuDNN: f32 and f64 (tf32: f32 only), dims
// within int, a fused ReLU only for f32 forward with a bias (cudnnConvolutionBiasActivationForward
// adds the bias in the same call; without one the op layer applies ReLU separately).
Support cudnn_basic_support(const ConvProblem& p, bool tf32);

// Note [Winograd on large filters]
// cuDNN's Winograd algorithms (both families, every pass) are not used for f32 filters larger than
// 3x3, neither forced nor by the default's search. Measured on an NVIDIA H200 (cuDNN 9.19,
// CUDNN_FMA_MATH, 2026-11-26, docs/results/h200_2026-11-26): on 5x5 filters their results were
// up to 4.6 % of the output's scale away from ref (AlexNet's 96 -> 256 5x5 layer, forward and
// backward data), beyond any FP32 tolerance, while every 3x3 problem matched ref within it. The
// transform of a larger tile amplifies rounding error; f64 keeps them (its error is ~1e-9 of
// f32's). Empty when the algorithm of `value` (pass `pass`) may run `p`, else the reason.
std::string cudnn_accuracy_refusal(const ConvProblem& p, int value);

// The variant's refusal when cuDNN reports `status` (e.g. "CUDNN_STATUS_NOT_SUPPORTED") for the
// family's algorithm of the problem's pass.
std::string cudnn_refusal(const ConvProblem& p, CudnnConvAlgo algo, const std::string& status);

// The find cache's key: every field of the problem that changes the result of the search except
// the fused ReLU (the fused forward runs the algorithm found for the plain one), plus the math.
// The device is a field of the problem. A plain struct, so the per-call lookup builds no string
// (Note [Stable cache entries], kernels/stable_cache.h).
struct CudnnConvKey {
  ConvProblem problem;  // fuse_relu always false
  bool tf32 = false;
  bool operator==(const CudnnConvKey&) const = default;
  auto fields() const { return std::tuple_cat(problem.fields(), std::tie(tf32)); }
};
CudnnConvKey cudnn_conv_key(const ConvProblem& p, bool tf32);
using CudnnConvKeyHash = ProblemHasher;  // Note [Problem fields]

// Note [cuDNN math type of the timed algorithm]
// A convolution descriptor's math type tells cuDNN which kernels it may use: CUDNN_FMA_MATH only
// FMA (IEEE FP32) kernels, CUDNN_TENSOR_OP_MATH tensor-core kernels too (TF32 for float data),
// and CUDNN_DEFAULT_MATH, on float data and Ampere or later, also TF32 tensor cores.
// cudnnFind*AlgorithmEx times each algorithm under the descriptor's math type and reports, per
// result, the math type that algorithm ran with (perf.mathType), which may differ from the one
// set (a TF32 search can report an FMA kernel as fastest). The algorithm alone does not name a
// kernel: running it under another math type may run another kernel than the one timed. So the
// default stores the math type of the winner and sets it on the descriptor before every run:
//   - IEEE f32 (cuda.cudnn): searched under FMA; a tensor-op result is never taken, and every
//     other result runs under FMA too, never under DEFAULT (which would permit TF32 again);
//   - TF32 (cuda.cudnn.tf32): searched under TENSOR_OP; the winner runs with the math type cuDNN
//     reported for it;
//   - f64: searched under DEFAULT (there is no reduced-precision double math); the winner runs
//     with its reported math type, unless that allows down-conversion (never taken).
// cuDNN's cudnnMathType_t values (static_asserted in conv_cudnn.cpp).
enum class CudnnMath : int {
  default_math = 0,
  tensor_op = 1,
  tensor_op_allow_conversion = 2,
  fma = 3
};
// "CUDNN_FMA_MATH", or "CUDNN_MATH_<value>?" when out of range.
std::string cudnn_math_name(CudnnMath m);
// The math type the search sets on the descriptor: FMA for IEEE f32, TENSOR_OP for TF32, DEFAULT
// for f64.
CudnnMath cudnn_search_math(DType dtype, bool tf32);
// The math type a search result that cuDNN timed under `timed` runs with, or nullopt when the
// result must not be taken (a tensor-op result of an IEEE f32 run).
std::optional<CudnnMath> cudnn_run_math(CudnnMath timed, DType dtype, bool tf32);

// Note [cuDNN workspace cap]
// The workspace cap of the default's search and of every forced algorithm, in bytes. `available`
// is what a workspace allocation can get on the device: the free device memory
// (cudaMemGetInfo) plus the blocks anvil's allocator caches (it gives them back when cudaMalloc
// runs out, Note [CUDA block cache]); nullopt when unknown. `env_mb` is the text of
// ANVIL_CUDNN_WORKSPACE_MB ("" when unset).
//   - unset: half of `available`. The search runs inside the first step, before the later
//     layers' activations and gradients exist; a workspace that took all of the memory would be
//     cached and then force the allocator to release its whole cache later in the step. Without
//     `available`: 1 GiB (kCudnnWorkspaceFallbackBytes).
//   - set: that many MiB (0 allows only algorithms without workspace), still at most `available`
//     (a larger workspace cannot be allocated, and the search would fail instead of skipping the
//     algorithms that need it).
// Throws anvil::Error on an unparsable value.
inline constexpr std::size_t kCudnnWorkspaceFallbackBytes = std::size_t{1024} << 20;
std::size_t cudnn_workspace_cap(const std::string& env_mb, std::optional<std::size_t> available);
// cudnn_workspace_cap with ANVIL_CUDNN_WORKSPACE_MB read from the environment.
std::size_t cudnn_workspace_cap_bytes(std::optional<std::size_t> available);

// ---- the default's choices (find cache and dispatch log) ------------------------------------
// One entry per CudnnConvKey, immutable once stored (Note [Stable cache entries]). The strings are
// built by the search only, for the dispatch log, labels and reports.
struct CudnnChoice {
  int algo = -1;                          // cuDNN enum value for the problem's pass
  CudnnMath math = CudnnMath::fma;        // set on the descriptor for every run
  CudnnMath timed_math = CudnnMath::fma;  // perf.mathType of the winner, as cuDNN reported it
  double ms = 0.0;                        // cuDNN's measured time of the winner
  std::size_t workspace = 0;              // bytes
  std::size_t workspace_cap = 0;          // bytes, the cap the search ran under
  std::string algo_name;                  // cudnn_algo_enum_name(pass, algo)
  std::string problem;                    // ConvProblem::repr()
  std::string candidates;  // "FFT 0.21 ms, IMPLICIT_GEMM 0.40 ms, WINOGRAD: NOT_SUPPORTED, ..."
  // The cuDNN descriptors of the problem, with `math` set, owned by the entry (created by
  // conv_cudnn.cpp, which alone knows their type; null in CPU tests).
  std::shared_ptr<const void> descriptors;
};
// The cached choice for `key`, if the search ran; the pointer stays valid for the whole process.
const CudnnChoice* cudnn_find_choice(const CudnnConvKey& key);
// Stores a search result unless another thread stored one for `key` first, and returns the
// stored one; with ANVIL_CUDNN_LOG=1 also prints one line to stderr for a new entry (the dispatch
// log: "cuda.cudnn: <problem> -> <algorithm> <math> (<ms> ms, workspace <MiB> MiB of <cap> MiB;
// <candidates>)").
const CudnnChoice& cudnn_record_choice(const CudnnConvKey& key, CudnnChoice choice);
// Every cached choice, ordered by problem text (for benchmark labels and reports).
std::vector<CudnnChoice> cudnn_choices();
// Forgets every choice, so that the next call searches again (tests); the entries stay alive.
void cudnn_clear_choices();
// The label of the default for `p`: "cuda.cudnn[CUDNN_CONVOLUTION_FWD_ALGO_FFT]" once the search
// ran for it, else "cuda.cudnn".
std::string cudnn_default_label(const ConvProblem& p, bool tf32 = false);

}  // namespace anvil::kernels
