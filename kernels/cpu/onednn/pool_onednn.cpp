// SPDX-License-Identifier: Apache-2.0
// Pooling `cpu.onednn`: oneDNN 2.6 pooling_forward / pooling_backward, f32, plain NCHW memory
// (no reorders: the primitives take our buffers as they are), primitives cached per problem and
// thread count (onednn_primitive_cache.h).
//   max          -> pooling_max; the training forward stores oneDNN's workspace, which the
//                   backward of the same variant reads (Note [Max-pool workspace]);
//   avg          -> pooling_avg_include_padding / pooling_avg_exclude_padding;
//   adaptive_avg -> pooling_avg_exclude_padding with kernel = stride = H/OH, only when H % OH == 0
//                   and W % OW == 0 (then PyTorch's bins are exactly those windows).
// ceil_mode is expressed by a larger bottom/right padding (Note [oneDNN pooling padding]).
// `cpu.onednn.bf16` is the same primitives with bf16 src/dst (Note [oneDNN bf16 pooling]).
#include <string>

#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_debug.h>

#include "engine/dispatch/pool_problem.h"
#include "kernels/cpu/onednn/onednn_primitive_cache.h"
#include "kernels/cpu/onednn/onednn_status.h"
#include "kernels/cpu/onednn/pool_bn_onednn.h"

namespace anvil::kernels {
namespace {

using dnnl::memory;

// Note [oneDNN pooling padding]
// oneDNN takes separate top/left and bottom/right paddings and requires
// OH = (H - KH + PT + PB) / SH + 1. Our OH (PyTorch's rule, ceil_mode included) is met with
// PB = max(0, (OH - 1) * SH + KH - H - PT). Padding never takes part in a maximum and is not
// counted by exclude_padding, so max and exclude-pad averages agree with PyTorch for any PB.
// include_padding divides by KH*KW, while PyTorch divides by the part of the window inside
// input + PT padding on both sides; they agree iff PB <= PT, which fails only for some ceil_mode
// shapes: those are refused with that reason.
struct Geometry {
  memory::dims kernel, strides, pad_l, pad_r;
  dnnl::algorithm alg;
};

std::int64_t pad_r_of(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t s,
                      std::int64_t pad_l) {
  return std::max<std::int64_t>(0, (out - 1) * s + k - in - pad_l);
}

Geometry geometry(const PoolProblem& p) {
  Geometry g;
  if (p.kind == PoolKind::adaptive_avg) {
    const std::int64_t kh = p.h / p.oh, kw = p.w / p.ow;
    g.kernel = {kh, kw};
    g.strides = {kh, kw};
    g.pad_l = {0, 0};
    g.pad_r = {0, 0};
    g.alg = dnnl::algorithm::pooling_avg_exclude_padding;
    return g;
  }
  g.kernel = {p.kh, p.kw};
  g.strides = {p.sh, p.sw};
  g.pad_l = {p.ph, p.pw};
  g.pad_r = {pad_r_of(p.h, p.oh, p.kh, p.sh, p.ph), pad_r_of(p.w, p.ow, p.kw, p.sw, p.pw)};
  g.alg = p.kind == PoolKind::max ? dnnl::algorithm::pooling_max
          : p.count_include_pad   ? dnnl::algorithm::pooling_avg_include_padding
                                  : dnnl::algorithm::pooling_avg_exclude_padding;
  return g;
}

// The geometry checks both variants share (f32 and bf16).
Support supports_geometry(const PoolProblem& p) {
  if (p.kind == PoolKind::adaptive_avg) {
    if (p.h % p.oh != 0 || p.w % p.ow != 0)
      return Support::no(detail::str_cat(
          "adaptive pooling maps to a fixed oneDNN window only when H % OH == 0 and W % OW == 0 "
          "(here ",
          p.h, " % ", p.oh, ", ", p.w, " % ", p.ow, "): PyTorch's bins would differ"));
    return Support::yes();
  }
  if (p.kind == PoolKind::avg && p.count_include_pad) {
    const Geometry g = geometry(p);
    if (g.pad_r[0] > p.ph || g.pad_r[1] > p.pw)
      return Support::no(detail::str_cat(
          "avg include_pad with ceil_mode windows reaching past the padding (bottom/right pad ",
          g.pad_r[0], "x", g.pad_r[1], " > ", p.ph, "x", p.pw,
          "): oneDNN divides by KH*KW, PyTorch by the padded part (Note [oneDNN pooling "
          "padding])"));
  }
  return Support::yes();
}

struct PoolEntry {
  dnnl::primitive primitive;
  memory::desc src_md, dst_md, workspace_md, scratchpad_md;
  std::size_t workspace_bytes = 0, scratchpad_bytes = 0;
  std::string impl;  // oneDNN's implementation name ("jit:avx512_core", "simple_nchw:any", ...)
};

std::shared_ptr<const PoolEntry> create(const PoolProblem& p) {
  const Geometry g = geometry(p);
  // f32, or bf16 for cpu.onednn.bf16 (the problem's dtype; the cache key holds it).
  const auto type = p.dtype == DType::bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const memory::desc src_md({p.n, p.c, p.h, p.w}, type, memory::format_tag::nchw);
  const memory::desc dst_md({p.n, p.c, p.oh, p.ow}, type, memory::format_tag::nchw);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto e = std::make_shared<PoolEntry>();
  e->src_md = src_md;
  e->dst_md = dst_md;
  // The backward needs a training forward as its hint (and the max workspace layout from it).
  const bool training = p.pass != PoolPass::forward_inference;
  const dnnl::pooling_forward::desc fwd_desc(
      training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference, g.alg,
      src_md, dst_md, g.strides, g.kernel, g.pad_l, g.pad_r);
  const dnnl::pooling_forward::primitive_desc fwd_pd(fwd_desc, attr, onednn::cpu_engine());
  if (p.pass == PoolPass::backward) {
    const dnnl::pooling_backward::desc bwd_desc(g.alg, src_md, dst_md, g.strides, g.kernel, g.pad_l,
                                                g.pad_r);
    const dnnl::pooling_backward::primitive_desc bwd_pd(bwd_desc, attr, onednn::cpu_engine(),
                                                        fwd_pd);
    e->workspace_md = bwd_pd.workspace_desc();
    e->scratchpad_md = bwd_pd.scratchpad_desc();
    e->impl = bwd_pd.impl_info_str();
    e->primitive = dnnl::pooling_backward(bwd_pd);
  } else {
    e->workspace_md = fwd_pd.workspace_desc();
    e->scratchpad_md = fwd_pd.scratchpad_desc();
    e->impl = fwd_pd.impl_info_str();
    e->primitive = dnnl::pooling_forward(fwd_pd);
  }
  e->workspace_bytes = e->workspace_md.get_size();
  e->scratchpad_bytes = e->scratchpad_md.get_size();
  return e;
}

onednn::PrimitiveCache<PoolEntry>& cache() {
  static onednn::PrimitiveCache<PoolEntry> c;
  return c;
}

Support supports_onednn(const PoolProblem& p) {
  if (p.dtype != DType::f32)
    return Support::no(detail::str_cat("cpu.onednn handles f32 only, not ", dtype_name(p.dtype)));
  return supports_geometry(p);
}

// Note [oneDNN bf16 pooling]
// cpu.onednn.bf16 runs oneDNN 2.6's pooling primitives with bf16 src and dst (diff_* likewise).
// Max pooling selects, so it is exact in any type; average pooling sums the window in f32 inside
// the primitive and rounds each output once. oneDNN's JIT bf16 pooling needs avx512_core and no
// more: on a CPU without avx512_bf16 it converts with its own emulation of the bf16 rounding
// (no vcvtneps2bf16), so unlike the bf16 conv (Note [oneDNN bf16 conv]) this variant does not
// ask for avx512_bf16. Where oneDNN has no JIT implementation for the problem (below
// avx512_core, or a shape it gives to `simple_nchw` / `ref`: seen for 1-3 channels, e.g. the
// pooling driver's odd problems) the variant declines, naming the implementation, and
// cpu.bf16_via_f32 runs (Note [16-bit pooling via f32 planes]); those loops are the kind that
// Note [Pool default order] measured tens of times slower than anvil's sweeps in f32.
// Max pooling here drops NaN like the f32 variant (measured 2026-11-28: a window holding a NaN
// gives its largest number, a window of NaNs -inf, oneDNN's -FLT_MAX rounded to bf16), so it is
// opt-in for max pooling too (Note [oneDNN max pooling and NaN]).
Support supports_onednn_bf16(const PoolProblem& p) {
  if (p.dtype != DType::bf16)
    return Support::no(
        detail::str_cat("cpu.onednn.bf16 handles bf16 only, not ", dtype_name(p.dtype)));
  if (Support s = supports_geometry(p); !s.ok) return s;
  // cpu_isa values are bit sets: an ISA includes the bits of those below it.
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  if ((isa & dnnl_cpu_isa_avx512_core) != dnnl_cpu_isa_avx512_core)
    return Support::no(
        "oneDNN 2.6's JIT bf16 pooling needs avx512_core; this CPU lacks it (or ONEDNN_MAX_CPU_ISA "
        "is below it): cpu.bf16_via_f32 runs instead");
  std::string impl;
  try {
    impl = cache().get(p.key(), [&] { return create(p); })->impl;
  } catch (const dnnl::error& err) {
    return Support::no(
        detail::str_cat("oneDNN 2.6 cannot create a bf16 pooling primitive for "
                        "this problem (",
                        dnnl_status2str(err.status), ")"));
  }
  if (impl.rfind("jit", 0) != 0)
    return Support::no(detail::str_cat(
        "oneDNN 2.6 offers only its ", impl,
        " implementation for this bf16 pooling problem, not a JIT one (Note [oneDNN bf16 "
        "pooling])"));
  // oneDNN may give the training forward to a non-JIT implementation when the backward has a
  // JIT one (seen for 2-3 channels). A max backward reads that forward's workspace, so it must
  // run where the forward runs; averages follow the same rule, so each problem is wholly this
  // variant's or wholly the fallback's.
  if (p.pass == PoolPass::backward)
    return supports_onednn_bf16(p.with_pass(PoolPass::forward_training));
  return Support::yes();
}

// Note [Pool default order]
// cpu.onednn leads cpu.omp in the order (kernels/variant_order.cpp) because oneDNN's JIT pooling
// (it transposes NCHW to a blocked layout internally) beats our row sweeps on the AlexNet and
// ResNet-50 shapes. But for some plain-NCHW shapes (the 64x224x224 VGG16 pool1, large planes in
// general) oneDNN 2.6 falls back to its `simple_nchw` or `ref` implementation, tens of times slower
// than cpu.omp. So the tables' heuristic asks oneDNN which implementation it would run (the
// primitive is created and cached anyway when it is selected) and names cpu.omp when that is
// not a JIT one, and always for adaptive pooling. Measurements: docs/kernels/pool_bn.md.
std::string pool_heuristic(const PoolProblem& p) {
  // Adaptive pooling: cpu.omp's plane sums (to 1x1) and copies (to the input size) beat the
  // oneDNN primitive on the ResNet-50 / VGG16 shapes (docs/kernels/pool_bn.md).
  // bf16: oneDNN's JIT average pooling, else (max pooling: its oneDNN variant is opt-in; adaptive
  // pooling as for f32) the plane-wise fallback (Note [oneDNN bf16 pooling]).
  if (p.dtype == DType::bf16)
    return p.kind == PoolKind::avg && supports_onednn_bf16(p).ok ? "cpu.onednn.bf16"
                                                                 : "cpu.bf16_via_f32";
  if (p.kind == PoolKind::adaptive_avg) return "cpu.omp";
  if (!supports_onednn(p).ok) return {};
  try {
    const auto e = cache().get(p.key(), [&] { return create(p); });
    return e->impl.rfind("jit", 0) == 0 ? "cpu.onednn" : "cpu.omp";
  } catch (const dnnl::error&) {
    return "cpu.omp";
  }
}

void run_onednn(const PoolArgs& a) {
  const PoolProblem& p = a.problem;
  const char* step = "creating the pooling primitive";
  try {
    const auto e = cache().get(p.key(), [&] { return create(p); });
    step = "executing the pooling primitive";
    auto& eng = onednn::cpu_engine();
    std::unordered_map<int, memory> args;
    if (p.pass == PoolPass::backward) {
      args.emplace(DNNL_ARG_DIFF_DST, memory(e->dst_md, eng, const_cast<void*>(a.dy)));
      args.emplace(DNNL_ARG_DIFF_SRC, memory(e->src_md, eng, a.dx));
    } else {
      args.emplace(DNNL_ARG_SRC, memory(e->src_md, eng, const_cast<void*>(a.x)));
      args.emplace(DNNL_ARG_DST, memory(e->dst_md, eng, a.y));
    }
    if (e->workspace_bytes > 0) {
      if (p.pass != PoolPass::backward) {
        *a.workspace =
            Tensor::empty({static_cast<std::int64_t>((e->workspace_bytes + 3) / 4)}, DType::i32);
      } else {
        ANVIL_CHECK(
            a.workspace && a.workspace->defined() && a.workspace->nbytes() >= e->workspace_bytes,
            p.dtype == DType::bf16 ? "cpu.onednn.bf16" : "cpu.onednn",
            "max-pool backward needs the workspace of a training forward of the same variant "
            "and problem (",
            e->workspace_bytes, " bytes) in ", p.repr());
      }
      args.emplace(DNNL_ARG_WORKSPACE, memory(e->workspace_md, eng, a.workspace->data_ptr()));
    }
    onednn::execute_and_wait(e->primitive, args, e->scratchpad_md, e->scratchpad_bytes);
  } catch (const dnnl::error& err) {
    onednn::fail_status(p.dtype == DType::bf16 ? "cpu.onednn.bf16" : "cpu.onednn", step, p.repr(),
                        err);
  }
}

}  // namespace

void register_pool_onednn() {
  // Note [oneDNN max pooling and NaN]
  // oneDNN 2.6's max pooling does not propagate NaN: a window holding numbers and a NaN gives
  // the largest number, a window of NaNs gives -FLT_MAX (measured; tests/test_nan_propagation.cpp).
  // That would let a diverging run look finite (Note [NaN propagation] in
  // kernels/cpu/elementwise_functors.h), so for max pooling cpu.onednn is opt-in: it runs only
  // when forced by name (ANVIL_VARIANT=max_pool2d=cpu.onednn), and the default is cpu.omp.
  for (PoolKind kind : {PoolKind::max, PoolKind::avg, PoolKind::adaptive_avg})
    pool_table(kind).add({
        .name = "cpu.onednn",
        .supports = supports_onednn,
        .fn = run_onednn,
        .description = kind == PoolKind::max
                           ? "oneDNN 2.6 max pooling, cached per problem; opt-in: drops NaN"
                           : "oneDNN 2.6 pooling primitives on plain NCHW, cached per problem",
        .opt_in = kind == PoolKind::max,
    });
  for (PoolKind kind : {PoolKind::max, PoolKind::avg, PoolKind::adaptive_avg})
    pool_table(kind).add({
        .name = "cpu.onednn.bf16",
        .supports = supports_onednn_bf16,
        .fn = run_onednn,
        .description = kind == PoolKind::max
                           ? "oneDNN 2.6 JIT bf16 max pooling (avx512_core); opt-in: drops NaN"
                           : "oneDNN 2.6 JIT bf16 pooling (avx512_core), f32 sums, rounded once",
        .opt_in = kind == PoolKind::max,  // Note [oneDNN bf16 pooling]
    });
  for (PoolKind kind : {PoolKind::max, PoolKind::avg, PoolKind::adaptive_avg})
    pool_table(kind).set_heuristic(pool_heuristic);  // Note [Pool default order]
}

}  // namespace anvil::kernels
