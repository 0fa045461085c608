// SPDX-License-Identifier: Apache-2.0
// Batch-norm `cpu.onednn`: oneDNN 2.6 batch_normalization forward (training: batch statistics
// out; inference: use_global_stats) and backward (prop_kind::backward: dx, dscale, dshift; with
// use_global_stats for eval-mode gradients), flags use_scale | use_shift, f32, plain NCHW
// memory (no reorders), primitives cached per problem and thread count
// (onednn_primitive_cache.h). oneDNN's variance is the biased one, as the table expects.
#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_debug.h>

#include "engine/dispatch/batch_norm_problem.h"
#include "kernels/cpu/onednn/onednn_primitive_cache.h"
#include "kernels/cpu/onednn/onednn_status.h"
#include "kernels/cpu/onednn/pool_bn_onednn.h"

namespace anvil::kernels {
namespace {

using dnnl::memory;
using dnnl::normalization_flags;

struct BnEntry {
  dnnl::primitive primitive;
  memory::desc data_md, stat_md, scratchpad_md;
  std::size_t scratchpad_bytes = 0;
};

std::shared_ptr<const BnEntry> create(const BatchNormProblem& p) {
  auto e = std::make_shared<BnEntry>();
  e->data_md = memory::desc({p.n, p.c, p.h, p.w}, memory::data_type::f32, memory::format_tag::nchw);
  e->stat_md = memory::desc({p.c}, memory::data_type::f32, memory::format_tag::a);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
  if (!p.batch_stats) flags = flags | normalization_flags::use_global_stats;
  const auto eps = static_cast<float>(p.eps);
  auto& eng = onednn::cpu_engine();
  if (p.pass == BatchNormPass::backward) {
    const dnnl::batch_normalization_forward::desc hint_desc(dnnl::prop_kind::forward_training,
                                                            e->data_md, eps, flags);
    const dnnl::batch_normalization_forward::primitive_desc hint(hint_desc, attr, eng);
    const dnnl::batch_normalization_backward::desc desc(dnnl::prop_kind::backward, e->data_md,
                                                        e->data_md, eps, flags);
    const dnnl::batch_normalization_backward::primitive_desc pd(desc, attr, eng, hint);
    e->scratchpad_md = pd.scratchpad_desc();
    e->primitive = dnnl::batch_normalization_backward(pd);
  } else {
    const auto prop = p.pass == BatchNormPass::forward_training
                          ? dnnl::prop_kind::forward_training
                          : dnnl::prop_kind::forward_inference;
    const dnnl::batch_normalization_forward::desc desc(prop, e->data_md, eps, flags);
    const dnnl::batch_normalization_forward::primitive_desc pd(desc, attr, eng);
    e->scratchpad_md = pd.scratchpad_desc();
    e->primitive = dnnl::batch_normalization_forward(pd);
  }
  e->scratchpad_bytes = e->scratchpad_md.get_size();
  return e;
}

void run_onednn(const BatchNormArgs& a) {
  static onednn::PrimitiveCache<BnEntry> cache;
  const BatchNormProblem& p = a.problem;
  const char* step = "creating the batch-normalisation primitive";
  try {
    const auto e = cache.get(p.key(), [&] { return create(p); });
    step = "executing the batch-normalisation primitive";
    auto& eng = onednn::cpu_engine();
    auto in = [&](const memory::desc& md, const void* ptr) {
      return memory(md, eng, const_cast<void*>(ptr));  // oneDNN's API takes non-const handles
    };
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, in(e->data_md, a.x)},
        {DNNL_ARG_MEAN, memory(e->stat_md, eng, a.mean)},
        {DNNL_ARG_VARIANCE, memory(e->stat_md, eng, a.var)},
        {DNNL_ARG_SCALE, in(e->stat_md, a.weight)},
    };
    if (p.pass == BatchNormPass::backward) {
      args.emplace(DNNL_ARG_DIFF_DST, in(e->data_md, a.dy));
      args.emplace(DNNL_ARG_DIFF_SRC, memory(e->data_md, eng, a.dx));
      args.emplace(DNNL_ARG_DIFF_SCALE, memory(e->stat_md, eng, a.dweight));
      args.emplace(DNNL_ARG_DIFF_SHIFT, memory(e->stat_md, eng, a.dbias));
      // oneDNN 2.6 refuses (invalid_arguments at execute) a use_shift backward without a SHIFT
      // argument, although the gradients do not depend on it; the bias when given, else any
      // [C] buffer (dbias, which the primitive writes afterwards).
      args.emplace(DNNL_ARG_SHIFT, in(e->stat_md, a.bias ? a.bias : a.dbias));
    } else {
      args.emplace(DNNL_ARG_SHIFT, in(e->stat_md, a.bias));
      args.emplace(DNNL_ARG_DST, memory(e->data_md, eng, a.y));
    }
    onednn::execute_and_wait(e->primitive, args, e->scratchpad_md, e->scratchpad_bytes);
  } catch (const dnnl::error& err) {
    onednn::fail_status("cpu.onednn", step, p.repr(), err);
  }
}

}  // namespace

void register_batch_norm_onednn() {
  batch_norm2d_table().add({
      .name = "cpu.onednn",
      .supports =
          [](const BatchNormProblem& p) {
            return p.dtype == DType::f32 ? Support::yes()
                                         : Support::no("cpu.onednn batch norm handles f32 only");
          },
      .fn = run_onednn,
      .description = "oneDNN 2.6 batch_normalization on plain NCHW, cached per problem",
  });
}

}  // namespace anvil::kernels
