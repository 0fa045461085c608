// SPDX-License-Identifier: Apache-2.0
#pragma once
// Problem descriptors: one short text per op problem, and its parser, so that a problem can be
// named on the command line (`anvil_bench --anvil_problem=conv2d:mb16ic64ih56oc64kh3ph1`), in a
// batch file, or in a test. parse(descriptor(p)) == p for every problem a model lists
// (tests/test_problem_descriptors.cpp).
//
// Note [Problem descriptors]
// A descriptor is a body and optional `:`-separated parts. Omitted parts take the defaults below,
// and descriptor() writes only the parts that differ from them (besides the body's mandatory
// sizes), so its output is the shortest text that parses back to the same problem.
//   gemm:         MxNxK[:NN|NT|TN|TT]  (mode default NN; descriptor() always writes it)
//                 parts b<batch> lda<n> ldb<n> ldc<n> sa<n> sb<n> sc<n> (strides between batch
//                 matrices) beta1 (C is read: beta != 0); defaults: batch 1, tight (dense) leading
//                 dimensions and strides, beta = 0.  64x2048x26752:NT, 128x4x8:NN:b16:f64
//   conv2d:       oneDNN benchdnn's letters: mb g ic ih iw oc oh ow kh kw sh sw ph pw dh dw,
//                 `_` ignored. Needed: ic ih oc kh. Defaults: mb 2, g 1, iw = ih, kw = kh, sh 1,
//                 sw = sh, ph 0 (or deduced from oh as benchdnn does), pw = ph (or deduced from
//                 ow), dh 0, dw = dh. As in benchdnn, dh counts the gaps (dh0 = no dilation,
//                 anvil's dil_h = dh + 1). oh/ow, when given, must match the other sizes.
//                 parts: fwd (default) | bwd_d | bwd_w, bias, relu; dtype also bf16 or f16.
//                 mb16ic64ih56oc64kh3ph1:bias, mb2ic32ih26oc64kh3:bwd_w:bf16
//   max_pool2d, avg_pool2d: mb ic ih iw kh kw sh sw ph pw oh ow. Needed: ic ih kh. Defaults:
//                 mb 2, iw = ih, kw = kh, sh = kh (PyTorch: the stride is the window), sw = sh,
//                 ph 0, pw = ph; oh/ow are computed and, when given, must match.
//                 parts: fwd_i (default) | fwd_t | bwd, ceil, exclude_pad (avg only); dtype
//                 also bf16 or f16.  mb16ic64ih112kh3sh2ph1:fwd_t, mb2ic96ih55kh3sh2:bwd:bf16
//   adaptive_avg_pool2d: mb ic ih iw oh ow. Needed: ic ih oh. Defaults: mb 2, iw = ih, ow = oh.
//                 parts: fwd_i (default) | fwd_t | bwd; dtype also bf16 or f16.
//                 mb16ic2048ih7oh1
//   batch_norm2d: mb ic ih iw. Needed: ic ih. Defaults: mb 2, iw = ih.
//                 parts: fwd_t (default) | fwd_i | bwd; batch (normalised with the batch
//                 statistics; the default except with fwd_i) | global (with the given ones);
//                 eps<x> (default 1e-05), mom<x> (running-statistics momentum, default 0.1).
//                 mb16ic64ih56:fwd_i
//   lstm:         t mb ic hc (sequence length, batch, input size, hidden size), all needed.
//                 parts: fwd_i (default) | fwd_t | bwd, hh_bias (b_hh present), state (h0/c0
//                 given).  t32mb128ic256hc256:fwd_t
//   elementwise:  n (output elements), needed; parts: the op (needed: neg exp ... pow_scalar_
//                 backward, as ew_name spells it), strided (an operand is not dense, or
//                 broadcast); the dtype may also be i32 or i64 for the ops defined on integers.
//                 n40000:add, n300:exp:strided:f64
//   reduce:       o r i (x seen as [outer, reduce, inner]). Needed: r. Defaults: o 1, i 1.
//                 parts: sum (default) | max.  o64r40i33:max
//   softmax:      r c (rows, columns), both needed. parts: the op, as softmax_op_name spells it
//                 (softmax, the default, log_softmax, softmax_backward, log_softmax_backward,
//                 cross_entropy_forward, cross_entropy_backward, cross_entropy_forward_grad);
//                 i32 (class ids; i64 the default).  r64c2000:cross_entropy_forward:i32
//   embedding:    v d n (table rows, row width, ids), all needed. parts: fwd (default) | bwd;
//                 i32 (ids; i64 the default).  v10000d200n700:bwd
//   dropout:      n, needed. parts: p<x> (the drop probability, default 0.5).  n40001:p0.2
//   sgd_update, adam_update, grad_norm, grad_scale: t n (tensors in the list, elements over all
//                 of them), both needed. parts: momentum (sgd_update only), decoupled
//                 (adam_update only: AdamW's decay).  t7n103776:momentum
// Every op also takes a dtype part (f32, the default, or f64) and a device part (cpu, the
// default, cuda for cuda:0, cudaN for cuda:N).
//
// A bad descriptor throws std::invalid_argument with one line naming the op, the descriptor
// and what is wrong (an unknown letter or part, a missing number or size, a number that
// overflows, inconsistent sizes, or what the problem's own validation refuses).
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "engine/dispatch/op_problem.h"
#include "engine/nn/module.h"

namespace anvil::harness {

// The descriptor of a problem, without the op name.
std::string descriptor(const OpProblem& p);
// "<op>:<descriptor>", e.g. "conv2d:mb16ic64ih56oc64kh3ph1".
std::string op_descriptor(const OpProblem& p);

// Parses the descriptor of a problem of table `op` (any of the 16: "gemm", "conv2d", ...,
// "grad_scale"; op_name() in engine/dispatch/op_problem.h lists them).
OpProblem parse_problem(std::string_view op, std::string_view descriptor);
// Parses "<op>:<descriptor>".
OpProblem parse_op_problem(std::string_view text);

// A batch file: one "<op>:<descriptor>" per line; blank lines and everything after a `#` are
// ignored. Each problem is named by its text. Errors name `source` and the line number.
std::vector<nn::NamedProblem> read_problem_list(std::istream& in, const std::string& source);
std::vector<nn::NamedProblem> read_problem_file(const std::string& path);

}  // namespace anvil::harness
