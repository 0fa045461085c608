// SPDX-License-Identifier: Apache-2.0
// GEMM on the GPU, the CUDA variants of the gemm table (engine/dispatch/gemm_problem.h):
//   cuda.cublas              cuBLAS {S,D}gemmStridedBatched, f32 and f64, full-precision FP32;
//   cuda.cublas.tf32         cublasGemmStridedBatchedEx with CUBLAS_COMPUTE_32F_FAST_TF32 (f32
//                            inputs rounded to TF32 on the tensor cores); opt-in by name only;
//   cuda.custom.gemm_tiled   anvil's own tiled SGEMM (gemm_tiled.cu), a research baseline.
// Row-major operands mapped onto column-major cuBLAS by Note [Row-major GEMM on cuBLAS]. All
// work is enqueued on the device's anvil stream (cuda_context.h) and not waited for.
#include <cublas_v2.h>

#include <climits>
#include <cstdint>
#include <string>

#include "engine/core/config.h"
#include "engine/core/error.h"
#include "engine/dispatch/gemm_problem.h"
#include "kernels/cuda/cublas_handle.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_guard.h"
#include "kernels/cuda/gemm_tiled.h"
#include "kernels/cuda/register.h"

namespace anvil::cuda {
namespace {

// Note [Row-major GEMM on cuBLAS]
// cuBLAS is column-major, and a row-major matrix X[r,c] with leading dimension ld is, read
// column-major with the same ld, the matrix X^T[c,r]. So the row-major C[M,N] = op(A) op(B) is
// computed as the column-major C^T[N,M] = op(B)^T op(A)^T, i.e. with the operands swapped and
// M and N swapped, and each operand keeps its own transpose flag:
//   * first cuBLAS operand  = B's memory, ld = ldb: read column-major it is B^T[N,K] (trans_b
//     false: op N gives op(B)^T directly) or S^T[K,N] with S = B stored [N,K] (trans_b: op T
//     gives S = op(B)^T); cuBLAS's rule lda >= rows-as-stored is ldb >= N resp. ldb >= K, which
//     is exactly GemmProblem::validate's rule for ldb;
//   * second cuBLAS operand = A's memory, ld = lda, op = trans_a ? T : N, likewise;
//   * C: column-major [N,M] with ld = ldc >= N; cuBLAS's (m, n, k) = (N, M, K);
//   * batch strides pass through unchanged (elements, as cuBLAS wants them).
// cuBLAS does not read C when beta == 0 (BLAS contract), so NaNs in C do not propagate.
struct ColumnMajorCall {
  cublasOperation_t op_first = CUBLAS_OP_N, op_second = CUBLAS_OP_N;
  int m = 0, n = 0, k = 0;
  int ld_first = 0, ld_second = 0, ldc = 0;
  long long stride_first = 0, stride_second = 0, stride_c = 0;
  int batch = 1;
};

ColumnMajorCall column_major_call(const GemmProblem& p) {
  ColumnMajorCall c;
  c.op_first = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  c.op_second = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  c.m = static_cast<int>(p.n);
  c.n = static_cast<int>(p.m);
  c.k = static_cast<int>(p.k);
  c.ld_first = static_cast<int>(p.ldb);
  c.ld_second = static_cast<int>(p.lda);
  c.ldc = static_cast<int>(p.ldc);
  c.stride_first = p.stride_b;
  c.stride_second = p.stride_a;
  c.stride_c = p.stride_c;
  c.batch = static_cast<int>(p.batch);
  return c;
}

// What every CUDA GEMM variant needs of a problem, beyond its dtype.
Support supports_common(const GemmProblem& p) {
  constexpr std::int64_t kIntMax = INT_MAX;
  if (p.m > kIntMax || p.n > kIntMax || p.k > kIntMax || p.lda > kIntMax || p.ldb > kIntMax ||
      p.ldc > kIntMax || p.batch > kIntMax)
    return Support::no(detail::str_cat("sizes or leading dimensions beyond 32-bit int (M=", p.m,
                                       " N=", p.n, " K=", p.k, " lda=", p.lda, " ldb=", p.ldb,
                                       " ldc=", p.ldc, " batch=", p.batch, ")"));
  // The batch entries run concurrently on the GPU: overlapping C matrices would race (the
  // CPU variants run them in order, so the result would also differ from ref).
  if (p.batch > 1 && p.m > 0 && p.n > 0 && p.stride_c < (p.m - 1) * p.ldc + p.n)
    return Support::no(detail::str_cat("the batch's C matrices overlap (stride_c=", p.stride_c,
                                       " < (M-1)*ldc+N=", (p.m - 1) * p.ldc + p.n, ")"));
  return Support::yes();
}

Support supports_cublas(const GemmProblem& p) {
  if (p.dtype != DType::f32 && p.dtype != DType::f64)
    return Support::no(
        detail::str_cat("cuda.cublas handles f32 and f64 only, got ", dtype_name(p.dtype)));
  return supports_common(p);
}

Support supports_f32_only(const GemmProblem& p, const char* name) {
  if (p.dtype != DType::f32)
    return Support::no(detail::str_cat(name, " handles f32 only, got ", dtype_name(p.dtype)));
  return supports_common(p);
}

TiledGemmParams tiled_params(const GemmArgs& args) {
  const GemmProblem& p = args.problem;
  TiledGemmParams t;
  t.trans_a = p.trans_a;
  t.trans_b = p.trans_b;
  t.m = p.m;
  t.n = p.n;
  t.k = p.k;
  t.lda = p.lda;
  t.ldb = p.ldb;
  t.ldc = p.ldc;
  t.batch = p.batch;
  t.stride_a = p.stride_a;
  t.stride_b = p.stride_b;
  t.stride_c = p.stride_c;
  t.a = static_cast<const float*>(args.a);
  t.b = static_cast<const float*>(args.b);
  t.c = static_cast<float*>(args.c);
  t.alpha = static_cast<float>(args.alpha);
  t.beta_zero = p.beta_zero;
  t.beta = p.beta_zero ? 0.0f : static_cast<float>(args.beta);
  return t;
}

// Checks shared by the variants' entry: a consistent problem on a CUDA device. Returns false
// when there is nothing to compute (an empty C).
bool prepare(const GemmArgs& args, const char* where) {
  const GemmProblem& p = args.problem;
  p.validate(where);
  ANVIL_CHECK(p.device.is_cuda(), where, "expected a problem on a CUDA device, got ",
              p.device.str(), " (", p.repr(), ")");
  if (p.m == 0 || p.n == 0) return false;
  ANVIL_CHECK(args.a != nullptr && args.b != nullptr && args.c != nullptr, where,
              "null operand pointer (A ", args.a, ", B ", args.b, ", C ", args.c, ") for ",
              p.repr());
  return true;
}

// With K == 0 there is no product: C = beta C (or 0). The tiled kernel's epilogue does exactly
// that and leaves no doubt about C not being read when beta == 0. Returns whether it handled
// the call (f32 only: the tiled kernel is single precision).
bool scaled_c_only(const GemmArgs& args) {
  if (args.problem.k != 0) return false;
  // Too many row tiles for the tiled kernel's grid: cuBLAS scales C itself (k = 0 is legal).
  if (!tiled_gemm_grid_fits(args.problem.m, args.problem.n)) return false;
  const int device = args.problem.device.index;
  cudaStream_t s = stream(device);
  DeviceGuard guard(device);
  launch_gemm_tiled(s, tiled_params(args));
  return true;
}

// ---- cuda.cublas ---------------------------------------------------------------------------

void gemm_cublas(const GemmArgs& args) {
  if (!prepare(args, "cuda.cublas")) return;
  const GemmProblem& p = args.problem;
  const int device = p.device.index;
  if (p.dtype == DType::f32 && scaled_c_only(args)) return;
  cublasHandle_t h = cublas_handle(device);
  DeviceGuard guard(device);
  const ColumnMajorCall c = column_major_call(p);
  if (p.dtype == DType::f64) {
    const double alpha = args.alpha, beta = p.beta_zero ? 0.0 : args.beta;
    ANVIL_CUBLAS_CHECK(cublasDgemmStridedBatched(
        h, c.op_first, c.op_second, c.m, c.n, c.k, &alpha, static_cast<const double*>(args.b),
        c.ld_first, c.stride_first, static_cast<const double*>(args.a), c.ld_second,
        c.stride_second, &beta, static_cast<double*>(args.c), c.ldc, c.stride_c, c.batch));
    return;
  }
  const float alpha = static_cast<float>(args.alpha);
  const float beta = p.beta_zero ? 0.0f : static_cast<float>(args.beta);
  ANVIL_CUBLAS_CHECK(cublasSgemmStridedBatched(
      h, c.op_first, c.op_second, c.m, c.n, c.k, &alpha, static_cast<const float*>(args.b),
      c.ld_first, c.stride_first, static_cast<const float*>(args.a), c.ld_second, c.stride_second,
      &beta, static_cast<float*>(args.c), c.ldc, c.stride_c, c.batch));
}

// ---- cuda.cublas.tf32 ----------------------------------------------------------------------
//
// Note [TF32 is opt-in]
// TF32 keeps FP32's exponent but only 10 mantissa bits of each input, so a product carries a
// relative error up to about 2^-10 instead of 2^-23: results differ from ref by ~1e-3 of
// sum |a||b| (tests and benchmarks validate it with that looser bound). It is registered below
// cuda.cublas, which supports every problem it does, so default selection never picks it; it
// runs only when forced by name (ForceVariant, --anvil_variant, ANVIL_VARIANT=gemm=...): it is
// registered `opt_in`, so autotune does not time it either (variant_table.h).

void gemm_cublas_tf32(const GemmArgs& args) {
  if (!prepare(args, "cuda.cublas.tf32")) return;
  const GemmProblem& p = args.problem;
  ANVIL_CHECK(p.dtype == DType::f32, "cuda.cublas.tf32", "f32 only, got ", dtype_name(p.dtype));
  const int device = p.device.index;
  if (scaled_c_only(args)) return;
  cublasHandle_t h = cublas_handle(device);
  DeviceGuard guard(device);
  const ColumnMajorCall c = column_major_call(p);
  // Compute type 32F*: alpha and beta are floats.
  const float alpha = static_cast<float>(args.alpha);
  const float beta = p.beta_zero ? 0.0f : static_cast<float>(args.beta);
  ANVIL_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      h, c.op_first, c.op_second, c.m, c.n, c.k, &alpha, args.b, CUDA_R_32F, c.ld_first,
      c.stride_first, args.a, CUDA_R_32F, c.ld_second, c.stride_second, &beta, args.c, CUDA_R_32F,
      c.ldc, c.stride_c, c.batch, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
}

// ---- cuda.custom.gemm_tiled ----------------------------------------------------------------

void gemm_tiled(const GemmArgs& args) {
  if (!prepare(args, "cuda.custom.gemm_tiled")) return;
  ANVIL_CHECK(args.problem.dtype == DType::f32, "cuda.custom.gemm_tiled", "f32 only, got ",
              dtype_name(args.problem.dtype));
  const int device = args.problem.device.index;
  cudaStream_t s = stream(device);
  DeviceGuard guard(device);  // the launch goes to the current device's context
  launch_gemm_tiled(s, tiled_params(args));
}

std::string cublas_version() {
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS)
    return "unknown";
  return detail::str_cat(major, ".", minor, ".", patch);
}

}  // namespace

void register_cuda_gemm() {
  add_library_version("cuBLAS", cublas_version());
  // Their order (kernels/variant_order.cpp) matters only among themselves (a CPU problem never
  // reaches them, and the CPU heuristic names no CUDA variant). Each later one supports a subset
  // of what cuda.cublas supports, so cuda.cublas is the default for every CUDA problem.
  gemm_table().add({
      .name = "cuda.cublas",
      .device = DeviceType::cuda,
      .supports = supports_cublas,
      .fn = gemm_cublas,
      .description = "cuBLAS {S,D}gemmStridedBatched, FP32/FP64 math, row-major by operand swap",
  });
  gemm_table().add({
      .name = "cuda.cublas.tf32",
      .device = DeviceType::cuda,
      .supports = [](const GemmProblem& p) { return supports_f32_only(p, "cuda.cublas.tf32"); },
      .fn = gemm_cublas_tf32,
      .description = "cuBLAS GemmStridedBatchedEx, TF32 tensor cores (lower precision; by name)",
      .opt_in = true,  // never the default, a heuristic's or autotune's pick
      .tags = {kTagTf32},
  });
  gemm_table().add({
      .name = "cuda.custom.gemm_tiled",
      .device = DeviceType::cuda,
      .supports =
          [](const GemmProblem& p) {
            Support s = supports_f32_only(p, "cuda.custom.gemm_tiled");
            if (s.ok && !tiled_gemm_grid_fits(p.m, p.n))
              s = Support::no(detail::str_cat("M=", p.m,
                                              " exceeds the launch grid (65535 tiles of ",
                                              kTiledGemmTileM, " rows)"));
            return s;
          },
      .fn = gemm_tiled,
      .description = "own 64x64x16 shared-memory tiled SGEMM, 4x4 outputs per thread (research)",
  });
}

}  // namespace anvil::cuda
