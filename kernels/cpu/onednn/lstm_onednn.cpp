// SPDX-License-Identifier: Apache-2.0
// One LSTM layer on oneDNN 2.6 (`cpu.onednn`, f32): dnnl::lstm_forward (inference/training)
// and dnnl::lstm_backward. Gate order i, f, c~, o is PyTorch's. Our weights [4H, I] and
// [4H, H] are oneDNN's `ldgoi` (dims l, d, i, g, o with i innermost), reordered into whatever
// the primitive asks for (format `any`); weight gradients come back the same way. oneDNN has
// one bias vector: with two, they are summed and both get the bias gradient. Primitives and
// reorders are cached per problem and thread count (Note [oneDNN LSTM primitive cache]).
#include "kernels/cpu/onednn/lstm_onednn.h"

#include <omp.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_debug.h>

#include "engine/core/error.h"
#include "engine/core/tensor.h"
#include "engine/dispatch/lstm_problem.h"
#include "kernels/cpu/onednn/onednn_primitive_cache.h"
#include "kernels/cpu/onednn/onednn_status.h"

namespace anvil::kernels {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using DataType = memory::data_type;

using onednn::cpu_engine;  // one engine and stream per process (onednn_primitive_cache.h)
using onednn::cpu_stream;

// An f32 buffer of at least `bytes` bytes from the anvil allocator (counted in memory stats).
Tensor buffer(std::size_t bytes) {
  return Tensor::empty({static_cast<std::int64_t>((bytes + 3) / 4)}, DType::f32);
}

// The user-side (our layout) memory descs of one problem.
struct UserDescs {
  memory::desc x, y, state, w_ih, w_hh, bias;
  explicit UserDescs(const LstmProblem& p) {
    const memory::dim T = p.T, B = p.B, I = p.I, H = p.H;
    x = memory::desc({T, B, I}, DataType::f32, Tag::tnc);
    y = memory::desc({T, B, H}, DataType::f32, Tag::tnc);
    state = memory::desc({1, 1, B, H}, DataType::f32, Tag::ldnc);
    w_ih = memory::desc({1, 1, I, 4, H}, DataType::f32, Tag::ldgoi);
    w_hh = memory::desc({1, 1, H, 4, H}, DataType::f32, Tag::ldgoi);
    bias = memory::desc({1, 1, 4, H}, DataType::f32, Tag::ldgo);
  }
};

// A reorder between two descs, or nothing when they are equal.
struct Reorder {
  bool needed = false;
  dnnl::reorder prim;
  memory::desc from, to;
  Reorder() = default;
  Reorder(const memory::desc& f, const memory::desc& t) : needed(f != t), from(f), to(t) {
    if (needed)
      prim = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), f, cpu_engine(), t));
  }
  // Runs from -> to; `to_buf` must hold to.get_size() bytes when needed.
  void run(void* from_ptr, void* to_ptr) const {
    dnnl::memory a(from, cpu_engine(), from_ptr), b(to, cpu_engine(), to_ptr);
    prim.execute(cpu_stream(), {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}});
  }
};

// Note [oneDNN LSTM primitive cache]
// Creating an LSTM primitive descriptor and primitive (implementation search, JIT of the
// pointwise kernels) costs milliseconds, so each (problem key, omp_get_max_threads()) creates
// its entry once: the forward primitive (training entries also hold the backward primitive,
// created with the forward one as its hint) and the weight reorders between our ldgoi layout
// and the layouts the primitives chose. The thread count is in the key because oneDNN fixes its
// work split at creation. Entries are immutable and shared; creation runs outside the lock.
struct Entry {
  UserDescs user;
  dnnl::lstm_forward::primitive_desc fwd_pd;
  dnnl::lstm_forward fwd;
  Reorder fwd_w_ih, fwd_w_hh;
  // training only
  bool has_bwd = false;
  dnnl::lstm_backward::primitive_desc bwd_pd;
  dnnl::lstm_backward bwd;
  Reorder bwd_w_ih, bwd_w_hh, bwd_dw_ih, bwd_dw_hh;
  explicit Entry(const LstmProblem& p) : user(p) {}
};

std::shared_ptr<const Entry> create_entry(const LstmProblem& p) {
  auto e = std::make_shared<Entry>(p);
  const UserDescs& u = e->user;
  // Without an initial state we still pass a (zero) src_iter: with a zero desc instead, the
  // oneDNN 2.6 backward computed wrong weight-iter gradients for the first step (measured).
  const memory::desc& src_iter = u.state;
  const memory::dim I = p.I, H = p.H;
  const memory::desc w_ih_any({1, 1, I, 4, H}, DataType::f32, Tag::any);
  const memory::desc w_hh_any({1, 1, H, 4, H}, DataType::f32, Tag::any);
  const bool training = p.pass != LstmPass::forward_inference;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::lstm_forward::desc fd(
      training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference,
      dnnl::rnn_direction::unidirectional_left2right, u.x, src_iter, src_iter, w_ih_any, w_hh_any,
      u.bias, u.y, u.state, u.state);
  e->fwd_pd = dnnl::lstm_forward::primitive_desc(fd, attr, cpu_engine());
  e->fwd = dnnl::lstm_forward(e->fwd_pd);
  e->fwd_w_ih = Reorder(u.w_ih, e->fwd_pd.weights_layer_desc());
  e->fwd_w_hh = Reorder(u.w_hh, e->fwd_pd.weights_iter_desc());
  if (training) {
    const dnnl::lstm_backward::desc bd(
        dnnl::prop_kind::backward, dnnl::rnn_direction::unidirectional_left2right, u.x, src_iter,
        src_iter, w_ih_any, w_hh_any, u.bias, u.y, u.state, u.state, u.x, src_iter, src_iter,
        w_ih_any, w_hh_any, u.bias, u.y, u.state, u.state);
    e->bwd_pd = dnnl::lstm_backward::primitive_desc(bd, attr, cpu_engine(), e->fwd_pd);
    e->bwd = dnnl::lstm_backward(e->bwd_pd);
    e->bwd_w_ih = Reorder(u.w_ih, e->bwd_pd.weights_layer_desc());
    e->bwd_w_hh = Reorder(u.w_hh, e->bwd_pd.weights_iter_desc());
    e->bwd_dw_ih = Reorder(e->bwd_pd.diff_weights_layer_desc(), u.w_ih);
    e->bwd_dw_hh = Reorder(e->bwd_pd.diff_weights_iter_desc(), u.w_hh);
    e->has_bwd = true;
  }
  return e;
}

std::shared_ptr<const Entry> cached_entry(const LstmProblem& p) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<const Entry>> cache;
  // forward_training and backward share one entry (the backward needs the forward's hint).
  LstmProblem kp = p;
  if (kp.pass == LstmPass::backward) kp.pass = LstmPass::forward_training;
  std::string key = kp.key() + " threads=" + std::to_string(onednn::threads_for_key());
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  auto entry = create_entry(kp);  // slow: outside the lock
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 256) cache.clear();
  return cache.emplace(std::move(key), std::move(entry)).first->second;
}

struct OnednnSaved final : LstmSaved {
  std::shared_ptr<const Entry> entry;
  Tensor workspace;
};

void* mut(const void* p) { return const_cast<void*>(p); }  // oneDNN takes non-const handles

// Combined bias (b_ih + b_hh) when there are two, else b_ih itself.
const void* combined_bias(const LstmArgs& a, Tensor& tmp) {
  if (!a.b_hh) return a.b_ih;
  const std::int64_t n = 4 * a.problem.H;
  tmp = Tensor::empty({n}, DType::f32);
  const auto* bi = static_cast<const float*>(a.b_ih);
  const auto* bh = static_cast<const float*>(a.b_hh);
  float* b = tmp.data<float>();
  for (std::int64_t j = 0; j < n; ++j) b[j] = bi[j] + bh[j];
  return b;
}

void forward(const LstmArgs& a) {
  const LstmProblem& p = a.problem;
  const auto e = cached_entry(p);
  const UserDescs& u = e->user;
  auto& eng = cpu_engine();
  Tensor w_ih_buf, w_hh_buf, bias_tmp;
  void* w_ih = mut(a.w_ih);
  void* w_hh = mut(a.w_hh);
  if (e->fwd_w_ih.needed) {
    w_ih_buf = buffer(e->fwd_w_ih.to.get_size());
    e->fwd_w_ih.run(w_ih, w_ih_buf.data_ptr());
    w_ih = w_ih_buf.data_ptr();
  }
  if (e->fwd_w_hh.needed) {
    w_hh_buf = buffer(e->fwd_w_hh.to.get_size());
    e->fwd_w_hh.run(w_hh, w_hh_buf.data_ptr());
    w_hh = w_hh_buf.data_ptr();
  }
  const void* bias = combined_bias(a, bias_tmp);
  Tensor scratch = buffer(e->fwd_pd.scratchpad_desc().get_size());
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC_LAYER, memory(u.x, eng, mut(a.x))},
      {DNNL_ARG_WEIGHTS_LAYER, memory(e->fwd_pd.weights_layer_desc(), eng, w_ih)},
      {DNNL_ARG_WEIGHTS_ITER, memory(e->fwd_pd.weights_iter_desc(), eng, w_hh)},
      {DNNL_ARG_BIAS, memory(u.bias, eng, mut(bias))},
      {DNNL_ARG_DST_LAYER, memory(u.y, eng, a.y)},
      {DNNL_ARG_DST_ITER, memory(u.state, eng, a.h_n)},
      {DNNL_ARG_DST_ITER_C, memory(u.state, eng, a.c_n)},
      {DNNL_ARG_SCRATCHPAD, memory(e->fwd_pd.scratchpad_desc(), eng, scratch.data_ptr())}};
  Tensor zero_state;
  if (!p.has_initial_state) zero_state = Tensor::zeros({p.B, p.H}, DType::f32);
  void* h0 = p.has_initial_state ? mut(a.h0) : zero_state.data_ptr();
  void* c0 = p.has_initial_state ? mut(a.c0) : zero_state.data_ptr();
  args.emplace(DNNL_ARG_SRC_ITER, memory(u.state, eng, h0));
  args.emplace(DNNL_ARG_SRC_ITER_C, memory(u.state, eng, c0));
  std::shared_ptr<OnednnSaved> saved;
  if (p.pass == LstmPass::forward_training) {
    saved = std::make_shared<OnednnSaved>();
    saved->variant = "cpu.onednn";
    saved->entry = e;
    saved->workspace = buffer(e->fwd_pd.workspace_desc().get_size());
    args.emplace(DNNL_ARG_WORKSPACE,
                 memory(e->fwd_pd.workspace_desc(), eng, saved->workspace.data_ptr()));
  }
  e->fwd.execute(cpu_stream(), args);
  cpu_stream().wait();
  if (saved) {
    ANVIL_CHECK(a.saved != nullptr, "cpu.onednn", "forward_training needs a slot for saved state");
    *a.saved = saved;
  }
}

void backward(const LstmArgs& a) {
  const LstmProblem& p = a.problem;
  const auto* saved = &saved_state_of<OnednnSaved>(a, "cpu.onednn");
  const auto e = saved->entry;
  ANVIL_CHECK(e->has_bwd, "cpu.onednn", "saved state holds no backward primitive for ", p.repr());
  const UserDescs& u = e->user;
  auto& eng = cpu_engine();
  const auto& pd = e->bwd_pd;
  Tensor w_ih_buf, w_hh_buf, bias_tmp;
  void* w_ih = mut(a.w_ih);
  void* w_hh = mut(a.w_hh);
  if (e->bwd_w_ih.needed) {
    w_ih_buf = buffer(e->bwd_w_ih.to.get_size());
    e->bwd_w_ih.run(w_ih, w_ih_buf.data_ptr());
    w_ih = w_ih_buf.data_ptr();
  }
  if (e->bwd_w_hh.needed) {
    w_hh_buf = buffer(e->bwd_w_hh.to.get_size());
    e->bwd_w_hh.run(w_hh, w_hh_buf.data_ptr());
    w_hh = w_hh_buf.data_ptr();
  }
  const void* bias = combined_bias(a, bias_tmp);
  // oneDNN accumulates into the weight and bias gradients: start them at zero.
  Tensor dw_ih_buf = buffer(pd.diff_weights_layer_desc().get_size());
  Tensor dw_hh_buf = buffer(pd.diff_weights_iter_desc().get_size());
  std::memset(dw_ih_buf.data_ptr(), 0, pd.diff_weights_layer_desc().get_size());
  std::memset(dw_hh_buf.data_ptr(), 0, pd.diff_weights_iter_desc().get_size());
  const std::size_t state_bytes = static_cast<std::size_t>(p.B * p.H) * sizeof(float);
  const std::size_t bias_bytes = static_cast<std::size_t>(4 * p.H) * sizeof(float);
  std::memset(a.db_ih, 0, bias_bytes);
  Tensor zeros_state, dx_scratch, dstate_scratch;
  auto state_or_zeros = [&](const void* ptr) -> void* {
    if (ptr) return mut(ptr);
    if (!zeros_state.defined()) zeros_state = Tensor::zeros({p.B, p.H}, DType::f32);
    return zeros_state.data_ptr();
  };
  void* dx = a.dx;
  if (!dx) {
    dx_scratch = buffer(static_cast<std::size_t>(p.T * p.B * p.I) * sizeof(float));
    dx = dx_scratch.data_ptr();
  }
  Tensor scratch = buffer(pd.scratchpad_desc().get_size());
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC_LAYER, memory(u.x, eng, mut(a.x))},
      {DNNL_ARG_WEIGHTS_LAYER, memory(pd.weights_layer_desc(), eng, w_ih)},
      {DNNL_ARG_WEIGHTS_ITER, memory(pd.weights_iter_desc(), eng, w_hh)},
      {DNNL_ARG_BIAS, memory(u.bias, eng, mut(bias))},
      {DNNL_ARG_DST_LAYER, memory(u.y, eng, mut(a.y))},
      {DNNL_ARG_DST_ITER, memory(u.state, eng, mut(a.h_n))},
      {DNNL_ARG_DST_ITER_C, memory(u.state, eng, mut(a.c_n))},
      {DNNL_ARG_DIFF_DST_LAYER, memory(u.y, eng, mut(a.dy))},
      {DNNL_ARG_DIFF_DST_ITER, memory(u.state, eng, state_or_zeros(a.dh_n))},
      {DNNL_ARG_DIFF_DST_ITER_C, memory(u.state, eng, state_or_zeros(a.dc_n))},
      {DNNL_ARG_DIFF_SRC_LAYER, memory(u.x, eng, dx)},
      {DNNL_ARG_DIFF_WEIGHTS_LAYER,
       memory(pd.diff_weights_layer_desc(), eng, dw_ih_buf.data_ptr())},
      {DNNL_ARG_DIFF_WEIGHTS_ITER, memory(pd.diff_weights_iter_desc(), eng, dw_hh_buf.data_ptr())},
      {DNNL_ARG_DIFF_BIAS, memory(u.bias, eng, a.db_ih)},
      {DNNL_ARG_WORKSPACE, memory(pd.workspace_desc(), eng, saved->workspace.data_ptr())},
      {DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), eng, scratch.data_ptr())}};
  {
    void* dh0 = a.dh0;
    void* dc0 = a.dc0;
    if (!dh0 || !dc0) {
      dstate_scratch = Tensor::empty({2, p.B, p.H}, DType::f32);
      if (!dh0) dh0 = dstate_scratch.data<float>();
      if (!dc0) dc0 = dstate_scratch.data<float>() + p.B * p.H;
    }
    args.emplace(DNNL_ARG_SRC_ITER,
                 memory(u.state, eng, p.has_initial_state ? mut(a.h0) : state_or_zeros(nullptr)));
    args.emplace(DNNL_ARG_SRC_ITER_C,
                 memory(u.state, eng, p.has_initial_state ? mut(a.c0) : state_or_zeros(nullptr)));
    args.emplace(DNNL_ARG_DIFF_SRC_ITER, memory(u.state, eng, dh0));
    args.emplace(DNNL_ARG_DIFF_SRC_ITER_C, memory(u.state, eng, dc0));
  }
  e->bwd.execute(cpu_stream(), args);
  cpu_stream().wait();
  // Weight gradients back into our [4H, I] / [4H, H] layout.
  if (e->bwd_dw_ih.needed)
    e->bwd_dw_ih.run(dw_ih_buf.data_ptr(), a.dw_ih);
  else
    std::memcpy(a.dw_ih, dw_ih_buf.data_ptr(),
                static_cast<std::size_t>(4 * p.H * p.I) * sizeof(float));
  if (e->bwd_dw_hh.needed)
    e->bwd_dw_hh.run(dw_hh_buf.data_ptr(), a.dw_hh);
  else
    std::memcpy(a.dw_hh, dw_hh_buf.data_ptr(),
                static_cast<std::size_t>(4 * p.H * p.H) * sizeof(float));
  cpu_stream().wait();
  if (a.db_hh) std::memcpy(a.db_hh, a.db_ih, bias_bytes);
  (void)state_bytes;
}

void run_onednn(const LstmArgs& a) {
  const LstmProblem& p = a.problem;
  const char* step = p.pass == LstmPass::backward ? "lstm_backward" : "lstm_forward";
  try {
    if (p.pass == LstmPass::backward)
      backward(a);
    else
      forward(a);
  } catch (const dnnl::error& err) {
    onednn::fail_status("cpu.onednn", step, p.repr(), err);
  }
}

}  // namespace

void register_lstm_onednn() {
  lstm_table().add({
      .name = "cpu.onednn",
      .supports =
          [](const LstmProblem& p) {
            if (p.dtype != DType::f32)
              return Support::no(
                  detail::str_cat("oneDNN LSTM handles f32 only, got ", dtype_name(p.dtype)));
            return Support::yes();
          },
      .fn = run_onednn,
      .description = "oneDNN 2.6 lstm_forward/lstm_backward, weights reordered from ldgoi, cached",
  });
}

}  // namespace anvil::kernels
