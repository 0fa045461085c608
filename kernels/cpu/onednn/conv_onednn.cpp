// SPDX-License-Identifier: Apache-2.0
// conv2d on oneDNN 2.6 convolution primitives, all three passes (forward with bias, backward
// data, backward weights + bias):
//   cpu.onednn           f32, algorithm::convolution_direct, format_tag::any (oneDNN's blocked
//                        layouts, e.g. nChw16c / OIhw16i16o) with cached reorders to/from NCHW;
//   cpu.onednn.nchw      f32, convolution_direct on plain NCHW / (G)OIHW memory descs, no reorders;
//   cpu.onednn.winograd  f32, algorithm::convolution_winograd, format_tag::any, where oneDNN has
//   it; cpu.onednn.bf16      bf16, as cpu.onednn with every tensor bf16 (Note [oneDNN bf16 conv]).
// Tensors stay NCHW / KCRS outside (engine/dispatch/conv_problem.h); Note [oneDNN conv cache].
#include "kernels/cpu/onednn/conv_onednn.h"

#include <omp.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_debug.h>

#include "engine/core/error.h"
#include "engine/dispatch/conv_problem.h"
#include "kernels/cpu/bf16/gemm_half.h"
#include "kernels/cpu/onednn/onednn_primitive_cache.h"
#include "kernels/cpu/onednn/onednn_status.h"
#include "kernels/cpu/thread_scratch.h"

namespace anvil::kernels {
namespace {

using dnnl::memory;
using Dims = memory::dims;

// Note [oneDNN conv cache]
// Creating a convolution primitive descriptor runs oneDNN's implementation search and JIT code
// generation (0.1 to tens of ms), so each (variant, problem, thread count) creates once:
//  * key = variant name + ConvProblem::key() + omp_get_max_threads() (oneDNN blocks and splits
//    work for the thread count it sees at creation, see Note [oneDNN matmul primitive cache]);
//  * value = the primitive, the plain (user) and chosen (implementation) memory descs of its
//    three tensors, a reorder primitive for each tensor whose layouts differ, and the
//    scratchpad desc; or, when oneDNN cannot build the primitive (winograd on a 1x1 filter,
//    only its reference implementation is left, ...), the reason, so supports() answers from
//    the cache in microseconds after the first try;
//  * the blocked copies of the tensors and the scratchpad live in thread-local buffers that
//    only grow (no allocation or page faults on the hot path).
// The backward passes need the forward primitive descriptor as a hint; it is created with the
// same descs and discarded.
constexpr std::size_t kMaxCachedPrimitives = 1024;

enum Slot { kSrc = 0, kWei = 1, kDst = 2, kScratchpad = 3 };

struct VariantSpec {
  const char* name;
  dnnl::algorithm algorithm;
  bool blocked;  // format_tag::any (+ reorders) vs plain descs
  DType dtype = DType::f32;
};

// Note [oneDNN bf16 conv]
// cpu.onednn.bf16 is cpu.onednn with bf16 src, weights, bias and dst (diff_* likewise): oneDNN's
// avx512_core_bf16 convolutions multiply with vdpbf16ps and accumulate in f32, rounding the
// output once (the contract of Note [Half GEMM via f32]). Every tensor is bf16 because a
// ConvProblem has one dtype; oneDNN would also write an f32 dst or diff_weights, but under
// autocast the output is bf16 anyway (Note [Autocast policy]). The variant runs only where the
// CPU has avx512_bf16 (gemm_bf16_native_available(), which a test can mask): elsewhere oneDNN
// 2.6 would emulate bf16 on avx512_core or fall to its reference loops, and the named fallback
// cpu.bf16_via_f32 (kernels/cpu/bf16/conv_half.cpp) runs instead. oneDNN's reference
// implementation is declined as for f32.
const VariantSpec kDirect{"cpu.onednn", dnnl::algorithm::convolution_direct, true};
const VariantSpec kDirectNchw{"cpu.onednn.nchw", dnnl::algorithm::convolution_direct, false};
const VariantSpec kWinograd{"cpu.onednn.winograd", dnnl::algorithm::convolution_winograd, true};
const VariantSpec kBf16{"cpu.onednn.bf16", dnnl::algorithm::convolution_direct, true, DType::bf16};

struct ConvEntry {
  dnnl::primitive primitive;
  memory::desc user[3], impl[3];  // by Slot (src, weights, dst; diff_* for backward)
  bool needs_reorder[3] = {false, false, false};
  dnnl::reorder to_impl[3], to_user[3];
  memory::desc bias_md, scratchpad_md;
  std::size_t scratchpad_bytes = 0;
  std::string impl_name;
};

struct CacheValue {
  std::shared_ptr<const ConvEntry> entry;  // null when unsupported
  std::string reason;
};

using onednn::cpu_engine;  // one engine and stream per process (onednn_primitive_cache.h)
using onednn::cpu_stream;

void* thread_buffer(int slot, std::size_t bytes) {
  thread_local ScratchBuffer bufs[4];  // by Slot
  return bufs[slot].get(bytes, "conv2d cpu.onednn");
}

std::shared_ptr<const ConvEntry> create_entry(const VariantSpec& v, const ConvProblem& p) {
  using Tag = memory::format_tag;
  // Every tensor in the variant's type (Note [oneDNN bf16 conv]); named f32 for the f32 variants.
  const auto f32 = v.dtype == DType::bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  auto& eng = cpu_engine();
  auto e = std::make_shared<ConvEntry>();
  const Dims src_dims{p.n, p.c, p.h, p.w}, dst_dims{p.n, p.k, p.p(), p.q()};
  const Dims wei_dims = p.groups > 1 ? Dims{p.groups, p.k_per_group(), p.c_per_group(), p.r, p.s}
                                     : Dims{p.k, p.c, p.r, p.s};
  e->user[kSrc] = memory::desc(src_dims, f32, Tag::nchw);
  e->user[kWei] = memory::desc(wei_dims, f32, p.groups > 1 ? Tag::goihw : Tag::oihw);
  e->user[kDst] = memory::desc(dst_dims, f32, Tag::nchw);
  memory::desc src_any = e->user[kSrc], wei_any = e->user[kWei], dst_any = e->user[kDst];
  if (v.blocked) {
    src_any = memory::desc(src_dims, f32, Tag::any);
    wei_any = memory::desc(wei_dims, f32, Tag::any);
    dst_any = memory::desc(dst_dims, f32, Tag::any);
  }
  const bool bias = p.has_bias && p.pass != ConvPass::backward_data;
  e->bias_md = bias ? memory::desc({p.k}, f32, Tag::x) : memory::desc();
  // oneDNN's dilation counts the gaps (0 = dense). Symmetric padding: oneDNN's output size rule
  // (H - ext + pl + pr) / stride + 1 is PyTorch's floor rule with pr = pl.
  const Dims strides{p.stride_h, p.stride_w}, dil{p.dil_h - 1, p.dil_w - 1};
  const Dims pad{p.pad_h, p.pad_w};

  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::primitive_attr fwd_attr = attr;  // no relu post-op: see supports()
  const dnnl::convolution_forward::desc fwd_desc(dnnl::prop_kind::forward_training, v.algorithm,
                                                 src_any, wei_any, e->bias_md, dst_any, strides,
                                                 dil, pad, pad);
  const dnnl::convolution_forward::primitive_desc fwd_pd(fwd_desc, fwd_attr, eng);
  dnnl::primitive_desc_base pd = fwd_pd;
  switch (p.pass) {
    case ConvPass::forward: {
      e->impl[kSrc] = fwd_pd.src_desc();
      e->impl[kWei] = fwd_pd.weights_desc();
      e->impl[kDst] = fwd_pd.dst_desc();
      e->primitive = dnnl::convolution_forward(fwd_pd);
      break;
    }
    case ConvPass::backward_data: {
      const dnnl::convolution_backward_data::desc d(v.algorithm, src_any, wei_any, dst_any, strides,
                                                    dil, pad, pad);
      const dnnl::convolution_backward_data::primitive_desc bpd(d, attr, eng, fwd_pd);
      e->impl[kSrc] = bpd.diff_src_desc();
      e->impl[kWei] = bpd.weights_desc();
      e->impl[kDst] = bpd.diff_dst_desc();
      e->primitive = dnnl::convolution_backward_data(bpd);
      pd = bpd;
      break;
    }
    case ConvPass::backward_weights: {
      const dnnl::convolution_backward_weights::desc d(v.algorithm, src_any, wei_any, e->bias_md,
                                                       dst_any, strides, dil, pad, pad);
      const dnnl::convolution_backward_weights::primitive_desc bpd(d, attr, eng, fwd_pd);
      e->impl[kSrc] = bpd.src_desc();
      e->impl[kWei] = bpd.diff_weights_desc();
      e->impl[kDst] = bpd.diff_dst_desc();
      e->primitive = dnnl::convolution_backward_weights(bpd);
      pd = bpd;
      break;
    }
  }
  e->impl_name = pd.impl_info_str();
  e->scratchpad_md = pd.scratchpad_desc();
  e->scratchpad_bytes = e->scratchpad_md.get_size();
  // Which slots are read (reordered in) and which written (reordered out) by this pass.
  const bool is_input[3] = {p.pass != ConvPass::backward_data, p.pass != ConvPass::backward_weights,
                            p.pass != ConvPass::forward};
  for (int s = 0; s < 3; ++s) {
    e->needs_reorder[s] = e->impl[s] != e->user[s];
    if (!e->needs_reorder[s]) continue;
    if (is_input[s])
      e->to_impl[s] =
          dnnl::reorder(dnnl::reorder::primitive_desc(eng, e->user[s], eng, e->impl[s]));
    else
      e->to_user[s] =
          dnnl::reorder(dnnl::reorder::primitive_desc(eng, e->impl[s], eng, e->user[s]));
  }
  return e;
}

CacheValue lookup(const VariantSpec& v, const ConvProblem& p) {
  static std::mutex mu;
  static std::unordered_map<std::string, CacheValue> cache;
  std::string key =
      std::string(v.name) + ' ' + p.key() + " threads=" + std::to_string(onednn::threads_for_key());
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  CacheValue value;
  try {  // slow: outside the lock
    value.entry = create_entry(v, p);
    // oneDNN's reference implementations are plain loops, slower than cpu.im2col: decline.
    if (value.entry->impl_name.rfind("ref", 0) == 0) {
      value.reason = "oneDNN offers only its reference implementation (" + value.entry->impl_name +
                     ") for this problem";
      value.entry = nullptr;
    }
  } catch (const dnnl::error& err) {
    value.reason = detail::str_cat(
        "oneDNN 2.6 cannot create a ",
        v.algorithm == dnnl::algorithm::convolution_winograd ? "winograd" : "direct",
        " convolution primitive for this problem (", dnnl_status2str(err.status), ")");
  }
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= kMaxCachedPrimitives) cache.clear();
  return cache.emplace(std::move(key), std::move(value)).first->second;
}

Support supports(const VariantSpec& v, const ConvProblem& p) {
  if (p.dtype != v.dtype)
    return Support::no(detail::str_cat(v.name, " handles ", dtype_name(v.dtype), " only, not ",
                                       dtype_name(p.dtype)));
  if (v.dtype == DType::bf16 && !gemm_bf16_native_available())
    return Support::no(
        "cpu.onednn.bf16 needs avx512_bf16; this CPU lacks it or a test masked it "
        "(cpu.bf16_via_f32 runs instead)");
  // Note [NaN propagation] (kernels/cpu/elementwise_functors.h): oneDNN 2.6's relu post-op
  // (eltwise_relu, alpha 0) maps a NaN pre-activation to 0 (tests/test_nan_propagation.cpp saw
  // it), which would hide a diverging run; the relu then runs as anvil's own pass.
  if (p.fuse_relu)
    return Support::no("oneDNN's relu post-op maps NaN to 0; the relu runs as a separate pass");
  if (v.algorithm == dnnl::algorithm::convolution_winograd &&
      !(p.r == 3 && p.s == 3 && p.stride_h == 1 && p.stride_w == 1 && p.dil_h == 1 && p.dil_w == 1))
    return Support::no("oneDNN winograd needs a 3x3 filter, stride 1, no dilation");
  if (p.n < 1 || p.c < 1 || p.k < 1 || p.groups < 1 || p.c % p.groups || p.k % p.groups ||
      p.p() < 1 || p.q() < 1)
    return Support::no("invalid problem");
  const CacheValue cv = lookup(v, p);
  return cv.entry ? Support::yes() : Support::no(cv.reason);
}

void run(const VariantSpec& v, const ConvArgs& a) {
  const ConvProblem& p = a.problem;
  p.validate(v.name);
  const char* step = "creating the convolution primitive";
  try {
    const CacheValue cv = lookup(v, p);
    if (!cv.entry) fail(v.name, "does not support ", p.repr(), ": ", cv.reason);
    const ConvEntry& e = *cv.entry;
    auto& eng = cpu_engine();
    auto& strm = cpu_stream();
    void* user_ptr[3];
    void* bias_ptr = nullptr;
    int arg_id[3];
    switch (p.pass) {
      case ConvPass::forward:
        user_ptr[kSrc] = const_cast<void*>(a.x);
        user_ptr[kWei] = const_cast<void*>(a.w);
        user_ptr[kDst] = a.y;
        bias_ptr = const_cast<void*>(a.b);
        arg_id[kSrc] = DNNL_ARG_SRC;
        arg_id[kWei] = DNNL_ARG_WEIGHTS;
        arg_id[kDst] = DNNL_ARG_DST;
        break;
      case ConvPass::backward_data:
        user_ptr[kSrc] = a.dx;
        user_ptr[kWei] = const_cast<void*>(a.w);
        user_ptr[kDst] = const_cast<void*>(a.dy);
        arg_id[kSrc] = DNNL_ARG_DIFF_SRC;
        arg_id[kWei] = DNNL_ARG_WEIGHTS;
        arg_id[kDst] = DNNL_ARG_DIFF_DST;
        break;
      case ConvPass::backward_weights:
        user_ptr[kSrc] = const_cast<void*>(a.x);
        user_ptr[kWei] = a.dw;
        user_ptr[kDst] = const_cast<void*>(a.dy);
        bias_ptr = a.db;
        arg_id[kSrc] = DNNL_ARG_SRC;
        arg_id[kWei] = DNNL_ARG_DIFF_WEIGHTS;
        arg_id[kDst] = DNNL_ARG_DIFF_DST;
        break;
    }
    step = "reordering the inputs into oneDNN's layout";
    std::unordered_map<int, memory> args;
    memory user_mem[3], impl_mem[3];
    for (int s = 0; s < 3; ++s) {
      user_mem[s] = memory(e.user[s], eng, user_ptr[s]);
      if (e.needs_reorder[s]) {
        impl_mem[s] = memory(e.impl[s], eng, thread_buffer(s, e.impl[s].get_size()));
        if (e.to_impl[s]) e.to_impl[s].execute(strm, user_mem[s], impl_mem[s]);
      } else {
        impl_mem[s] = user_mem[s];
      }
      args.emplace(arg_id[s], impl_mem[s]);
    }
    if (p.has_bias && p.pass != ConvPass::backward_data)
      args.emplace(p.pass == ConvPass::forward ? DNNL_ARG_BIAS : DNNL_ARG_DIFF_BIAS,
                   memory(e.bias_md, eng, bias_ptr));
    if (e.scratchpad_bytes > 0)
      args.emplace(DNNL_ARG_SCRATCHPAD,
                   memory(e.scratchpad_md, eng, thread_buffer(kScratchpad, e.scratchpad_bytes)));
    step = "executing the convolution primitive";
    e.primitive.execute(strm, args);
    step = "reordering the outputs back to NCHW";
    for (int s = 0; s < 3; ++s)
      if (e.needs_reorder[s] && e.to_user[s]) e.to_user[s].execute(strm, impl_mem[s], user_mem[s]);
    strm.wait();
  } catch (const dnnl::error& err) {
    onednn::fail_status(v.name, step, p.repr(), err);
  }
}

void add(const VariantSpec& v, const char* description) {
  conv_table().add({
      .name = v.name,
      .supports = [&v](const ConvProblem& p) { return supports(v, p); },
      .fn = [&v](const ConvArgs& a) { run(v, a); },
      .description = description,
  });
}

}  // namespace

// The name of the oneDNN implementation a variant runs for p ("jit:avx512_core", "gemm:jit",
// ...), or the reason it cannot: for docs/kernels/conv.md and benchmarks.
std::string conv_onednn_impl_name(const std::string& variant, const ConvProblem& p) {
  for (const VariantSpec* v : {&kDirect, &kDirectNchw, &kWinograd, &kBf16})
    if (variant == v->name) {
      const CacheValue cv = lookup(*v, p);
      return cv.entry ? cv.entry->impl_name : "unsupported: " + cv.reason;
    }
  return "not a oneDNN variant";
}

void register_conv_onednn() {
  add(kDirect, "oneDNN 2.6 direct convolution, blocked layout, cached reorders");
  add(kWinograd, "oneDNN 2.6 winograd convolution (3x3 stride 1), blocked layout");
  add(kDirectNchw, "oneDNN 2.6 direct convolution on plain NCHW/OIHW descs, no reorders");
  add(kBf16, "oneDNN 2.6 direct convolution in bf16 (avx512_bf16), f32 accumulation, blocked");
}

}  // namespace anvil::kernels
