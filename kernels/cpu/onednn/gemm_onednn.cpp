// SPDX-License-Identifier: Apache-2.0
// GEMM on oneDNN 2.6, all four transpose modes, alpha/beta, batched:
//   cpu.onednn              f32, dnnl_sgemm (row-major BLAS-style call), batched by a loop;
//   cpu.onednn.matmul       f32, the dnnl::matmul primitive; strided memory descriptors express
//                           the transposes and the batch (3-D descs) without copies; primitives
//                           are cached per problem (Note [oneDNN matmul primitive cache]);
//   cpu.onednn.matmul_bf16  the same primitive on bf16 operands and C (f32 accumulation, C
//                           rounded once), where the CPU has avx512_bf16 (oneDNN's own bf16
//                           kernels; without it oneDNN would emulate, which is not this variant).
// Row-major operands as in engine/dispatch/gemm_problem.h. Threads: oneDNN is built on the same
// OpenMP runtime and reads omp_get_max_threads() when it runs, so set_num_threads() reaches it.
#include "kernels/cpu/onednn/gemm_onednn.h"

#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_debug.h>

#include "engine/core/config.h"
#include "engine/core/error.h"
#include "engine/core/half_types.h"
#include "engine/dispatch/gemm_problem.h"
#include "kernels/cpu/onednn/onednn_primitive_cache.h"
#include "kernels/cpu/bf16/gemm_half.h"
#include "kernels/cpu/onednn/onednn_status.h"

namespace anvil::kernels {
namespace {

// Hex-float text: exact, so alpha/beta values that differ in the last bit get different keys.
std::string exact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

Support supports_f32(const GemmProblem& p) {
  if (p.dtype != DType::f32)
    return Support::no(
        "cpu.onednn and cpu.onednn.matmul handle f32 only (bf16: "
        "cpu.onednn.matmul_bf16)");
  return Support::yes();
}

Support supports_bf16(const GemmProblem& p) {
  if (p.dtype != DType::bf16)
    return Support::no("cpu.onednn.matmul_bf16 handles bf16 only, not " +
                       std::string(dtype_name(p.dtype)));
  if (!gemm_bf16_native_available())
    return Support::no(
        "cpu.onednn.matmul_bf16 needs avx512_bf16; this CPU lacks it or a test "
        "masked it");
  return Support::yes();
}

dnnl::memory::data_type onednn_type(DType d) {
  return d == DType::bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

// Shapes oneDNN need not see: an empty C, or K == 0 (C = beta * C, or 0). Returns true when done.
// T is C's element type: float (beta * C in float, as before bf16 existed) or BFloat16 (beta * C
// in double, rounded once).
template <typename T>
bool handle_degenerate(const GemmArgs& args) {
  const GemmProblem& p = args.problem;
  if (p.m == 0 || p.n == 0) return true;
  if (p.k != 0) return false;
  for (std::int64_t bi = 0; bi < p.batch; ++bi)
    for (std::int64_t i = 0; i < p.m; ++i) {
      T* c = static_cast<T*>(args.c) + bi * p.stride_c + i * p.ldc;
      for (std::int64_t j = 0; j < p.n; ++j) {
        if (p.beta_zero)
          c[j] = T(0.0f);
        else if constexpr (std::is_same_v<T, float>)
          c[j] = static_cast<float>(args.beta) * c[j];
        else
          c[j] = T(args.beta * static_cast<double>(c[j]));
      }
    }
  return true;
}

// ---- cpu.onednn: dnnl_sgemm ----------------------------------------------------------------

void gemm_dnnl_sgemm(const GemmArgs& args) {
  const GemmProblem& p = args.problem;
  p.validate("cpu.onednn");
  if (handle_degenerate<float>(args)) return;
  const char ta = p.trans_a ? 'T' : 'N', tb = p.trans_b ? 'T' : 'N';
  const auto alpha = static_cast<float>(args.alpha);
  // beta == 0 is BLAS's "C is output only" contract (NaN in C does not propagate).
  const float beta = p.beta_zero ? 0.0f : static_cast<float>(args.beta);
  const auto* a = static_cast<const float*>(args.a);
  const auto* b = static_cast<const float*>(args.b);
  auto* c = static_cast<float*>(args.c);
  for (std::int64_t i = 0; i < p.batch; ++i) {
    const dnnl_status_t st = dnnl_sgemm(ta, tb, p.m, p.n, p.k, alpha, a + i * p.stride_a, p.lda,
                                        b + i * p.stride_b, p.ldb, beta, c + i * p.stride_c, p.ldc);
    if (st != dnnl_success)
      onednn::fail_status("cpu.onednn",
                          detail::str_cat("dnnl_sgemm('", ta, "', '", tb, "', M=", p.m, ", N=", p.n,
                                          ", K=", p.k, ", alpha=", alpha, ", lda=", p.lda,
                                          ", ldb=", p.ldb, ", beta=", beta, ", ldc=", p.ldc, ")"),
                          detail::str_cat(p.repr(), " (batch ", i, " of ", p.batch, ")"), st);
  }
}

// ---- cpu.onednn.matmul: dnnl::matmul ---------------------------------------------------------
//
// Note [oneDNN matmul primitive cache]
// Creating a matmul primitive descriptor + primitive costs from tens of microseconds to
// milliseconds (implementation search, blocking decisions, JIT code generation), far more than
// a small GEMM. So each distinct problem creates its primitive once:
//  * key = GemmProblem::key() (shape, modes, leading dims, batch and strides, beta_zero)
//        + alpha (baked in as the output scale) + beta (baked in as the sum post-op scale, only
//        when beta_zero is false) + onednn::threads_for_key(): oneDNN chooses its blocking and
//        work split for the thread count seen at creation (1 inside a parallel region), so a
//        primitive created for 1 thread must not serve a 2-thread run or the reverse (oneDNN's
//        own primitive cache keys on it for that reason);
//  * value = the primitive, its memory descs and its scratchpad size, immutable and
//        shared (shared_ptr), so a lookup holds the mutex only for the map access, and creation
//        runs outside it (two threads racing on a new key both create; the first insert wins);
//  * scratchpad_mode::user: oneDNN's library-managed scratchpad may be shared between primitives
//        (unless built with concurrent execution), so each call passes its own, from a
//        thread-local buffer that only grows;
//  * the engine and stream are function-local statics (one CPU engine per process; a CPU stream
//        executes synchronously in the calling thread and keeps no per-call state).
// The map is bounded: past PrimitiveCache::kMax entries it is cleared (a training run uses a
// few dozen shapes; a sweep over many alpha values must not grow memory without end). The cache is
// onednn::PrimitiveCache (onednn_primitive_cache.h), shared with the pooling and batch-norm
// variants.

struct MatmulEntry {
  dnnl::matmul primitive;
  dnnl::memory::desc a_md, b_md, c_md, scratchpad_md;
  std::size_t scratchpad_bytes = 0;
};

using onednn::cpu_engine;  // one engine and stream per process (onednn_primitive_cache.h)
using onednn::cpu_stream;

// Memory desc of one stored operand. Logical dims are those of op(X) ([rows, cols], with a
// leading batch dim for 3-D); `transposed` swaps the strides instead of moving data.
// A batch stride of 0 (the same matrix for every batch entry) becomes a batch dim of 1, which
// matmul broadcasts.
dnnl::memory::desc operand_desc(const GemmProblem& p, std::int64_t rows, std::int64_t cols,
                                std::int64_t ld, bool transposed, std::int64_t batch_stride) {
  using dnnl::memory;
  const std::int64_t row_stride = transposed ? 1 : ld, col_stride = transposed ? ld : 1;
  const memory::data_type type = onednn_type(p.dtype);
  if (p.batch == 1) return memory::desc({rows, cols}, type, {row_stride, col_stride});
  const std::int64_t batch_dim = batch_stride == 0 ? 1 : p.batch;
  // For a broadcast operand the batch stride is unused; give it the matrix footprint.
  const std::int64_t footprint = transposed ? cols * ld : rows * ld;
  const std::int64_t bstride = batch_stride == 0 ? footprint : batch_stride;
  return memory::desc({batch_dim, rows, cols}, type, {bstride, row_stride, col_stride});
}

std::shared_ptr<const MatmulEntry> create_matmul(const GemmArgs& args) {
  const GemmProblem& p = args.problem;
  auto e = std::make_shared<MatmulEntry>();
  e->a_md = operand_desc(p, p.m, p.k, p.lda, p.trans_a, p.stride_a);
  e->b_md = operand_desc(p, p.k, p.n, p.ldb, p.trans_b, p.stride_b);
  e->c_md = operand_desc(p, p.m, p.n, p.ldc, false, p.stride_c);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (args.alpha != 1.0) attr.set_output_scales(0, {static_cast<float>(args.alpha)});
  if (!p.beta_zero) {
    // dst = alpha * (A B) + beta * dst: output scales apply before post-ops.
    dnnl::post_ops ops;
    ops.append_sum(static_cast<float>(args.beta));
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::desc desc(e->a_md, e->b_md, e->c_md);
  const dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
  e->scratchpad_md = pd.scratchpad_desc();
  e->scratchpad_bytes = e->scratchpad_md.get_size();
  e->primitive = dnnl::matmul(pd);
  return e;
}

std::shared_ptr<const MatmulEntry> cached_matmul(const GemmArgs& args) {
  static onednn::PrimitiveCache<MatmulEntry> cache;  // appends the thread count to the key
  const std::string key = args.problem.key() + " alpha=" + exact(args.alpha) +
                          (args.problem.beta_zero ? std::string() : " beta=" + exact(args.beta));
  return cache.get(key, [&] { return create_matmul(args); });
}

void gemm_dnnl_matmul(const GemmArgs& args) {
  const GemmProblem& p = args.problem;
  p.validate("cpu.onednn.matmul");
  if (p.dtype == DType::bf16 ? handle_degenerate<BFloat16>(args) : handle_degenerate<float>(args))
    return;
  const char* step = "creating the matmul primitive";
  try {
    const auto e = cached_matmul(args);
    step = "executing the matmul primitive";
    void* scratch = onednn::thread_scratchpad(e->scratchpad_bytes, "cpu.onednn.matmul");
    auto& eng = cpu_engine();
    // oneDNN's API takes non-const handles; matmul only reads SRC and WEIGHTS.
    dnnl::memory a_mem(e->a_md, eng, const_cast<void*>(args.a));
    dnnl::memory b_mem(e->b_md, eng, const_cast<void*>(args.b));
    dnnl::memory c_mem(e->c_md, eng, args.c);
    std::unordered_map<int, dnnl::memory> exec_args{
        {DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}};
    if (e->scratchpad_bytes > 0)
      exec_args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(e->scratchpad_md, eng, scratch));
    e->primitive.execute(cpu_stream(), exec_args);
    cpu_stream().wait();
  } catch (const dnnl::error& err) {
    onednn::fail_status(
        "cpu.onednn.matmul", step,
        detail::str_cat(p.repr(), " alpha=", args.alpha, p.beta_zero ? "" : " beta=",
                        p.beta_zero ? std::string() : std::to_string(args.beta)),
        err);
  }
}

}  // namespace

void register_gemm_onednn() {
  const dnnl_version_t* v = dnnl_version();
  add_library_version("oneDNN", std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                                    std::to_string(v->patch));
  gemm_table().add({
      .name = "cpu.onednn",
      .supports = supports_f32,
      .fn = gemm_dnnl_sgemm,
      .description = "oneDNN 2.6 dnnl_sgemm (row-major), batched by a loop",
  });
  gemm_table().add({
      .name = "cpu.onednn.matmul",
      .supports = supports_f32,
      .fn = gemm_dnnl_matmul,
      .description = "oneDNN 2.6 matmul primitive, strided descs (no copies), cached per problem",
  });
  gemm_table().add({
      .name = "cpu.onednn.matmul_bf16",
      .supports = supports_bf16,
      .fn = gemm_dnnl_matmul,
      .description = "oneDNN 2.6 matmul primitive on bf16 (avx512_bf16), f32 accumulation",
  });
}

}  // namespace anvil::kernels
