// SPDX-License-Identifier: Apache-2.0
// Tensor-level embedding and LSTM layer (engine/ops/lstm.h): checks, allocation, dispatch.
#include "engine/ops/lstm.h"

#include "engine/core/views.h"
#include "engine/dispatch/embedding_problem.h"
#include "engine/dispatch/trial_timer.h"

namespace anvil::ops {
namespace {

Tensor dense(const Tensor& t) { return t.defined() ? raw::contiguous(t) : t; }

LstmInputs dense_inputs(const LstmInputs& in) {
  return {dense(in.x),    dense(in.h0),   dense(in.c0),  dense(in.w_ih),
          dense(in.w_hh), dense(in.b_ih), dense(in.b_hh)};
}

const void* ptr(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

LstmArgs forward_args(const LstmProblem& p, const LstmInputs& in, const LstmForwardResult& out) {
  LstmArgs a;
  a.problem = p;
  a.x = ptr(in.x);
  a.h0 = ptr(in.h0);
  a.c0 = ptr(in.c0);
  a.w_ih = ptr(in.w_ih);
  a.w_hh = ptr(in.w_hh);
  a.b_ih = ptr(in.b_ih);
  a.b_hh = ptr(in.b_hh);
  a.y = out.y.data_ptr();
  a.h_n = out.h_n.data_ptr();
  a.c_n = out.c_n.data_ptr();
  return a;
}

// A variant handed in by the caller (not selected for p) must run on p's device: a CPU kernel
// would read and write a CUDA tensor's memory through host pointers.
void check_variant_device(const LstmTable::Variant& v, const LstmProblem& p, const char* where) {
  ANVIL_CHECK(v.device == p.device_type(), where, "variant '", v.name, "' runs on ",
              v.device == DeviceType::cpu ? "cpu" : "cuda", " but the tensors are on ", p.device,
              " (", p.repr(), ")");
}

LstmForwardResult alloc_outputs(const LstmProblem& p, Device dev) {
  LstmForwardResult r;
  r.y = Tensor::empty({p.T, p.B, p.H}, p.dtype, dev);
  r.h_n = Tensor::empty({p.B, p.H}, p.dtype, dev);
  r.c_n = Tensor::empty({p.B, p.H}, p.dtype, dev);
  return r;
}

}  // namespace

// ---- embedding ---------------------------------------------------------------------------------

namespace {
EmbeddingArgs embedding_args(EmbeddingPass pass, const Tensor& ids, std::int64_t rows,
                             std::int64_t dim, DType dtype, Device device) {
  EmbeddingArgs a;
  a.problem.pass = pass;
  a.problem.dtype = dtype;
  a.problem.index_dtype = ids.dtype();
  a.problem.device = device;
  a.problem.rows = rows;
  a.problem.dim = dim;
  a.problem.n = ids.numel();
  a.ids = ids.data_ptr();
  return a;
}
}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  check_defined(weight, "embedding", "weight");
  check_defined(ids, "embedding", "ids");
  ANVIL_CHECK(weight.dim() == 2, "embedding", "expected weight [V, D] (2-D), got ",
              shape_str(weight.sizes()));
  ANVIL_CHECK(is_floating(weight.dtype()), "embedding", "weight must be f32 or f64, got ",
              dtype_name(weight.dtype()));
  ANVIL_CHECK(ids.dtype() == DType::i64 || ids.dtype() == DType::i32, "embedding",
              "ids must be int64 or int32, got ", dtype_name(ids.dtype()));
  check_same_device(weight, ids, "embedding");
  const std::int64_t V = weight.sizes()[0], D = weight.sizes()[1];
  const Tensor w = raw::contiguous(weight), id = raw::contiguous(ids);
  Shape shape = ids.sizes();
  shape.push_back(D);
  Tensor out = Tensor::empty(shape, weight.dtype(), weight.device());
  if (id.numel() == 0 || D == 0) return out;
  // The variant checks the ids: on the host at once, on a GPU at the next wait for it.
  EmbeddingArgs a =
      embedding_args(EmbeddingPass::forward, id, V, D, weight.dtype(), weight.device());
  a.weight = w.data_ptr();
  a.out = out.data_ptr();
  embedding_table().run(a);
  return out;
}

Tensor embedding_backward(const Tensor& dy, const Tensor& ids, std::int64_t num_rows) {
  check_defined(dy, "embedding_backward", "dy");
  check_defined(ids, "embedding_backward", "ids");
  check_same_device(dy, ids, "embedding_backward");
  ANVIL_CHECK(dy.dim() >= 1, "embedding_backward", "gradient must have a D dimension, got ",
              shape_str(dy.sizes()));
  const std::int64_t D = dy.sizes().back(), n = ids.numel();
  ANVIL_CHECK(dy.numel() == n * D, "embedding_backward", "gradient ", shape_str(dy.sizes()),
              " does not match ids ", shape_str(ids.sizes()), " x D=", D);
  const Tensor g = raw::contiguous(dy), id = raw::contiguous(ids);
  if (n == 0 || D == 0 || num_rows == 0)
    return Tensor::zeros({num_rows, D}, dy.dtype(), dy.device());
  Tensor grad = Tensor::empty({num_rows, D}, dy.dtype(), dy.device());
  EmbeddingArgs a =
      embedding_args(EmbeddingPass::backward, id, num_rows, D, dy.dtype(), dy.device());
  a.dy = g.data_ptr();
  a.grad = grad.data_ptr();
  embedding_table().run(a);
  return grad;
}

// ---- LSTM
// ----------------------------------------------------------------------------------------

LstmProblem lstm_problem_for(const LstmInputs& in, LstmPass pass, const char* where) {
  check_defined(in.x, where, "input");
  check_defined(in.w_ih, where, "w_ih");
  check_defined(in.w_hh, where, "w_hh");
  check_defined(in.b_ih, where, "b_ih");
  ANVIL_CHECK(in.x.dim() == 3, where, "expected input x [T, B, I] (3-D), got ",
              shape_str(in.x.sizes()));
  ANVIL_CHECK(in.w_hh.dim() == 2 && in.w_hh.sizes()[0] == 4 * in.w_hh.sizes()[1], where,
              "expected w_hh [4H, H], got ", shape_str(in.w_hh.sizes()));
  const std::int64_t T = in.x.sizes()[0], B = in.x.sizes()[1], I = in.x.sizes()[2];
  const std::int64_t H = in.w_hh.sizes()[1];
  ANVIL_CHECK(T >= 1 && B >= 1 && I >= 1 && H >= 1, where, "empty sizes: x ",
              shape_str(in.x.sizes()), " (T, B, I), hidden size H=", H);
  ANVIL_CHECK(in.w_ih.dim() == 2 && in.w_ih.sizes()[0] == 4 * H && in.w_ih.sizes()[1] == I, where,
              "w_ih is ", shape_str(in.w_ih.sizes()), " but expected [4H, I] = [", 4 * H, ",", I,
              "] (H=", H, " from w_hh ", shape_str(in.w_hh.sizes()), ", I=", I, " from x ",
              shape_str(in.x.sizes()), ")");
  ANVIL_CHECK(in.b_ih.dim() == 1 && in.b_ih.sizes()[0] == 4 * H, where, "b_ih is ",
              shape_str(in.b_ih.sizes()), " but expected [4H] = [", 4 * H, "]");
  if (in.b_hh.defined())
    ANVIL_CHECK(in.b_hh.dim() == 1 && in.b_hh.sizes()[0] == 4 * H, where, "b_hh is ",
                shape_str(in.b_hh.sizes()), " but expected [4H] = [", 4 * H, "]");
  ANVIL_CHECK(in.h0.defined() == in.c0.defined(), where, "give both h0 and c0 or neither, got h0 ",
              in.h0.defined() ? "defined" : "undefined", " and c0 ",
              in.c0.defined() ? "defined" : "undefined");
  for (const Tensor* s : {&in.h0, &in.c0})
    if (s->defined())
      ANVIL_CHECK(s->dim() == 2 && s->sizes()[0] == B && s->sizes()[1] == H, where,
                  s == &in.h0 ? "h0" : "c0", " is ", shape_str(s->sizes()),
                  " but expected [B, H] = [", B, ",", H, "]");
  const DType dt = in.x.dtype();
  ANVIL_CHECK(is_floating(dt), where, "input must be f32 or f64, got ", dtype_name(dt));
  const std::pair<const Tensor*, const char*> named[] = {{&in.h0, "h0"},     {&in.c0, "c0"},
                                                         {&in.w_ih, "w_ih"}, {&in.w_hh, "w_hh"},
                                                         {&in.b_ih, "b_ih"}, {&in.b_hh, "b_hh"}};
  for (const auto& [t, name] : named) {
    if (!t->defined()) continue;
    ANVIL_CHECK(t->dtype() == dt, where, "dtype mismatch: input is ", dtype_name(dt), " but ", name,
                " is ", dtype_name(t->dtype()));
    check_same_device(in.x, *t, where);
  }
  LstmProblem p;
  p.T = T;
  p.B = B;
  p.I = I;
  p.H = H;
  p.two_biases = in.b_hh.defined();
  p.has_initial_state = in.h0.defined();
  p.pass = pass;
  p.dtype = dt;
  p.device = in.x.device();
  return p;
}

const LstmTable::Variant& select_lstm_variant(const LstmProblem& p, const LstmInputs* in) {
  if (!in) return lstm_table().select(p);
  const LstmInputs d = dense_inputs(*in);
  auto trial = [&](const LstmTable::Variant& v) {
    LstmForwardResult scratch = alloc_outputs(p, d.x.device());
    std::shared_ptr<LstmSaved> saved;
    LstmArgs a = forward_args(p, d, scratch);
    a.saved = &saved;
    return time_trial(
        p.device, [&] { v.fn(a); }, "lstm autotune");
  };
  return lstm_table().select(p, trial);
}

LstmForwardResult lstm_forward(const LstmTable::Variant& variant, const LstmInputs& in,
                               bool training) {
  const LstmProblem p =
      lstm_problem_for(in, training ? LstmPass::forward_training : LstmPass::forward_inference);
  check_variant_device(variant, p, "lstm_forward");
  const LstmInputs d = dense_inputs(in);
  LstmForwardResult out = alloc_outputs(p, d.x.device());
  out.variant = variant.name;
  LstmArgs a = forward_args(p, d, out);
  a.saved = &out.saved;
  variant.fn(a);
  return out;
}

LstmGrads lstm_backward(const LstmTable::Variant& variant, const LstmInputs& in,
                        const LstmForwardResult& fwd, const Tensor& dy, const Tensor& dh_n,
                        const Tensor& dc_n, bool need_dx) {
  const LstmProblem p = lstm_problem_for(in, LstmPass::backward);
  ANVIL_CHECK(fwd.variant == variant.name, "lstm_backward", "forward ran variant '", fwd.variant,
              "' but backward was asked of '", variant.name, "'");
  ANVIL_CHECK(fwd.saved != nullptr, "lstm_backward",
              "no saved state: the forward was not a training forward (", p.repr(), ")");
  ANVIL_CHECK(dy.defined() && dy.sizes() == fwd.y.sizes(), "lstm_backward", "dy must be ",
              shape_str(fwd.y.sizes()), ", got ",
              dy.defined() ? shape_str(dy.sizes()) : "undefined");
  check_variant_device(variant, p, "lstm_backward");
  for (const Tensor* t : {&dy, &dh_n, &dc_n})
    if (t->defined()) check_same_device(in.x, *t, "lstm_backward");
  const LstmInputs d = dense_inputs(in);
  const Tensor dyd = dense(dy), dhd = dense(dh_n), dcd = dense(dc_n);
  LstmGrads g;
  const Device dev = d.x.device();
  const DType dt = p.dtype;
  if (need_dx) g.dx = Tensor::empty({p.T, p.B, p.I}, dt, dev);
  if (p.has_initial_state) {
    g.dh0 = Tensor::empty({p.B, p.H}, dt, dev);
    g.dc0 = Tensor::empty({p.B, p.H}, dt, dev);
  }
  g.dw_ih = Tensor::empty({4 * p.H, p.I}, dt, dev);
  g.dw_hh = Tensor::empty({4 * p.H, p.H}, dt, dev);
  g.db_ih = Tensor::empty({4 * p.H}, dt, dev);
  if (p.two_biases) g.db_hh = Tensor::empty({4 * p.H}, dt, dev);
  LstmArgs a = forward_args(p, d, fwd);
  std::shared_ptr<LstmSaved> saved = fwd.saved;
  a.saved = &saved;
  a.dy = dyd.data_ptr();
  a.dh_n = ptr(dhd);
  a.dc_n = ptr(dcd);
  a.dx = g.dx.defined() ? g.dx.data_ptr() : nullptr;
  a.dh0 = g.dh0.defined() ? g.dh0.data_ptr() : nullptr;
  a.dc0 = g.dc0.defined() ? g.dc0.data_ptr() : nullptr;
  a.dw_ih = g.dw_ih.data_ptr();
  a.dw_hh = g.dw_hh.data_ptr();
  a.db_ih = g.db_ih.data_ptr();
  a.db_hh = g.db_hh.defined() ? g.db_hh.data_ptr() : nullptr;
  variant.fn(a);
  return g;
}

}  // namespace anvil::ops
