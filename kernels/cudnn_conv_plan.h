// SPDX-License-Identifier: Apache-2.0
#pragma once
// The pure logic of the cuDNN conv2d variants (kernels/cuda/conv_cudnn.cpp), without any CUDA or
// cuDNN header, so it is compiled into libanvil and unit-tested on machines without a GPU
// (tests/test_cudnn_conv_plan.cpp): variant names, the algorithm of each pass per variant (as
// cuDNN's enum values; conv_cudnn.cpp static_asserts them against cudnn_ops.h), the descriptor
// parameters of a ConvProblem, refusal messages, the problem key of the find cache, the
// workspace cap, and the cache of the default's choices, which doubles as its dispatch log.
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
// per problem key (cudnn_find_key) under the workspace cap and caches the fastest.
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/dispatch/conv_problem.h"
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
std::string cudnn_find_key(const ConvProblem& p, bool tf32);

// Workspace cap of the default's search and of every forced algorithm, in bytes:
// ANVIL_CUDNN_WORKSPACE_MB (MiB, default 1024). Throws anvil::Error on an unparsable value.
std::size_t cudnn_workspace_cap_bytes();

// ---- the default's choices (find cache and dispatch log) ------------------------------------
struct CudnnChoice {
  int algo = -1;              // cuDNN enum value for the problem's pass
  std::string algo_name;      // cudnn_algo_enum_name(pass, algo)
  double ms = 0.0;            // cuDNN's measured time of the winner
  std::size_t workspace = 0;  // bytes
  std::string problem;        // ConvProblem::repr()
  std::string candidates;     // "FFT 0.21 ms, IMPLICIT_GEMM 0.40 ms, WINOGRAD: NOT_SUPPORTED, ..."
};
// The cached choice for `key`, if the search ran.
std::optional<CudnnChoice> cudnn_cached_choice(const std::string& key);
// Stores a search result; with ANVIL_CUDNN_LOG=1 also prints one line to stderr (the dispatch
// log: "cuda.cudnn: <problem> -> <algorithm> (<ms> ms, workspace <MiB> MiB; <candidates>)").
void cudnn_record_choice(const std::string& key, CudnnChoice choice);
// Every cached choice, in key order (for benchmark labels and reports).
std::vector<std::pair<std::string, CudnnChoice>> cudnn_choices();
// Forgets every choice (tests).
void cudnn_clear_choices();
// The label of the default for `p`: "cuda.cudnn[CUDNN_CONVOLUTION_FWD_ALGO_FFT]" once the search
// ran for it, else "cuda.cudnn".
std::string cudnn_default_label(const ConvProblem& p, bool tf32 = false);

}  // namespace anvil::kernels
