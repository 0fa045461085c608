// SPDX-License-Identifier: Apache-2.0
// Tensor-level pooling (engine/ops/pool.h): checks, allocation, dispatch; the max backward runs
// the variant that made the forward's workspace (Note [Max-pool workspace]).
#include "engine/ops/pool.h"

#include "engine/core/views.h"
#include "engine/dispatch/trial_timer.h"

namespace anvil::ops {
namespace {

void check_cpu_or_same(const Tensor& x, const char* where) {
  check_defined(x, where, "input");
  ANVIL_CHECK(is_any_floating(x.dtype()), where,
              "needs a floating-point input (f32, f64, bf16 or f16), got ", dtype_name(x.dtype()));
}

void check_matches(const Tensor& x, const PoolProblem& p, const char* where) {
  ANVIL_CHECK(x.dim() == 4 && x.sizes()[0] == p.n && x.sizes()[1] == p.c && x.sizes()[2] == p.h &&
                  x.sizes()[3] == p.w,
              where, "input ", shape_str(x.sizes()), " does not match the problem ", p.repr());
  ANVIL_CHECK(x.dtype() == p.dtype && x.device() == p.device, where, "input is ",
              dtype_name(x.dtype()), " on ", x.device().str(), " but the problem is ", p.repr());
}

}  // namespace

PoolProblem pool2d_problem(PoolKind kind, const Tensor& x, std::array<std::int64_t, 2> kernel,
                           std::array<std::int64_t, 2> stride, std::array<std::int64_t, 2> padding,
                           bool ceil_mode, bool count_include_pad, const char* where) {
  check_cpu_or_same(x, where);
  return make_pool_problem(kind, x.sizes(), kernel, stride, padding, ceil_mode, count_include_pad,
                           x.dtype(), x.device(), where);
}

PoolProblem adaptive_avg_pool2d_problem(const Tensor& x, std::array<std::int64_t, 2> output_size,
                                        const char* where) {
  check_cpu_or_same(x, where);
  return make_adaptive_pool_problem(x.sizes(), output_size, x.dtype(), x.device(), where);
}

PoolForward pool2d_forward(const Tensor& x, const PoolProblem& problem, bool training) {
  const char* where = pool_op_name(problem.kind);
  check_defined(x, where, "input");
  check_matches(x, problem, where);
  PoolForward f;
  f.problem =
      problem.with_pass(training ? PoolPass::forward_training : PoolPass::forward_inference);
  f.y = Tensor::empty({problem.n, problem.c, problem.oh, problem.ow}, x.dtype(), x.device());
  if (f.y.numel() == 0) return f;
  const Tensor xd = raw::contiguous(x);
  PoolArgs args;
  args.problem = f.problem;
  args.x = xd.data_ptr();
  args.y = f.y.data_ptr();
  args.workspace = &f.workspace;
  PoolTable& table = pool_table(problem.kind);
  // Autotune trials write scratch outputs and a scratch workspace.
  auto trial = [&](const PoolTable::Variant& v) {
    Tensor scratch_y = Tensor::empty(f.y.sizes(), f.y.dtype(), f.y.device()), scratch_ws;
    PoolArgs t = args;
    t.y = scratch_y.data_ptr();
    t.workspace = &scratch_ws;
    return time_trial(
        x.device(), [&] { v.fn(t); }, "pool autotune");
  };
  const auto& v = table.select(args.problem, trial);
  f.variant = v.name;
  v.fn(args);
  return f;
}

Tensor pool2d_backward(const Tensor& dy, const PoolForward& fwd) {
  const PoolProblem& fp = fwd.problem;
  const char* where = pool_op_name(fp.kind);
  check_defined(dy, where, "grad_output");
  ANVIL_CHECK(dy.dim() == 4 && dy.sizes()[0] == fp.n && dy.sizes()[1] == fp.c &&
                  dy.sizes()[2] == fp.oh && dy.sizes()[3] == fp.ow,
              where, "grad_output ", shape_str(dy.sizes()), " does not match the output [", fp.n,
              ",", fp.c, ",", fp.oh, ",", fp.ow, "] of ", fp.repr());
  ANVIL_CHECK(dy.dtype() == fp.dtype, where, "grad_output is ", dtype_name(dy.dtype()),
              " but the input was ", dtype_name(fp.dtype));
  ANVIL_CHECK(dy.device() == fp.device, where, "grad_output is on ", dy.device(),
              " but the input was on ", fp.device);
  Tensor dx = Tensor::empty({fp.n, fp.c, fp.h, fp.w}, fp.dtype, fp.device);
  if (dx.numel() == 0) return dx;
  if (fp.out_numel() == 0) return dx.zero_();
  const Tensor dyd = raw::contiguous(dy);
  PoolArgs args;
  args.problem = fp.with_pass(PoolPass::backward);
  args.dy = dyd.data_ptr();
  args.dx = dx.data_ptr();
  PoolTable& table = pool_table(fp.kind);
  if (fp.kind != PoolKind::max) {
    auto trial = [&](const PoolTable::Variant& v) {
      Tensor scratch = Tensor::empty(dx.sizes(), dx.dtype(), dx.device());
      PoolArgs t = args;
      t.dx = scratch.data_ptr();
      return time_trial(
          dx.device(), [&] { v.fn(t); }, "pool autotune");
    };
    table.run(args, trial);
    return dx;
  }
  // Note [Max-pool workspace]: the producer of the workspace computes the backward.
  ANVIL_CHECK(fp.pass == PoolPass::forward_training && fwd.workspace.defined(), where,
              "backward needs a training forward (one that kept its workspace), got ", fp.repr());
  const auto* v = table.find(fwd.variant);
  ANVIL_CHECK(v != nullptr, where, "the forward's variant '", fwd.variant, "' is not registered");
  const Support s = v->supports ? v->supports(args.problem) : Support::yes();
  ANVIL_CHECK(s.ok, where, "variant '", v->name, "' made the forward's workspace but cannot run ",
              args.problem.repr(), ": ", s.reason);
  Tensor ws = fwd.workspace;  // the kernels take a mutable handle; the backward only reads it
  args.workspace = &ws;
  v->fn(args);
  return dx;
}

}  // namespace anvil::ops
