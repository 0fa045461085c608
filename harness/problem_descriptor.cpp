// SPDX-License-Identifier: Apache-2.0
// Problem descriptors and their parser (harness/problem_descriptor.h, Note [Problem descriptors]).
#include "harness/problem_descriptor.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <map>
#include <optional>
#include <stdexcept>

#include "engine/core/error.h"
#include "harness/descriptor_reader.h"

namespace anvil::harness {

std::string real(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string common_parts(DType dtype, const Device& device) {
  std::string s;
  if (dtype != DType::f32) s += ":" + std::string(dtype_name(dtype));
  if (device.is_cuda()) s += device.index == 0 ? ":cuda" : ":cuda" + std::to_string(device.index);
  return s;
}

std::int64_t need(const Reader& r, const std::map<std::string, std::int64_t>& v, const char* key) {
  auto it = v.find(key);
  if (it == v.end()) r.fail(std::string("missing '") + key + "'");
  return it->second;
}
std::int64_t get(const std::map<std::string, std::int64_t>& v, const char* key, std::int64_t def) {
  auto it = v.find(key);
  return it == v.end() ? def : it->second;
}

namespace {

// ---- gemm ------------------------------------------------------------------------------------

std::string gemm_descriptor(const GemmProblem& p) {
  std::string s = detail::str_cat(p.m, 'x', p.n, 'x', p.k, ':', p.mode());
  const GemmProblem d = GemmProblem::dense(p.m, p.n, p.k, p.trans_a, p.trans_b, p.dtype, p.batch);
  if (p.batch != 1) s += detail::str_cat(":b", p.batch);
  if (p.lda != d.lda) s += detail::str_cat(":lda", p.lda);
  if (p.ldb != d.ldb) s += detail::str_cat(":ldb", p.ldb);
  if (p.ldc != d.ldc) s += detail::str_cat(":ldc", p.ldc);
  if (p.stride_a != d.stride_a) s += detail::str_cat(":sa", p.stride_a);
  if (p.stride_b != d.stride_b) s += detail::str_cat(":sb", p.stride_b);
  if (p.stride_c != d.stride_c) s += detail::str_cat(":sc", p.stride_c);
  if (!p.beta_zero) s += ":beta1";
  return s + common_parts(p.dtype, p.device);
}

GemmProblem parse_gemm(Reader& r) {
  std::int64_t mnk[3] = {0, 0, 0};
  std::string_view body = r.body();
  const char* names[3] = {"M", "N", "K"};
  for (int i = 0; i < 3; ++i) {
    const std::size_t x = body.find('x');
    if ((i < 2) != (x != std::string_view::npos)) r.fail("expected MxNxK, e.g. 64x2048x26752:NT");
    mnk[i] = r.integer(body.substr(0, x), i == 0 ? "the start" : names[i - 1] + std::string("x"));
    if (x != std::string_view::npos) body = body.substr(x + 1);
  }
  const int mode = r.take_choice({"NN", "NT", "TN", "TT"});
  const bool ta = mode == 2 || mode == 3, tb = mode == 1 || mode == 3;
  const auto batch = r.take_integer("b");
  const auto lda = r.take_integer("lda"), ldb = r.take_integer("ldb"), ldc = r.take_integer("ldc");
  const auto sa = r.take_integer("sa"), sb = r.take_integer("sb"), sc = r.take_integer("sc");
  const bool beta = r.take_word("beta1");
  const DType dtype = r.take_dtype();
  const Device device = r.take_device();
  r.finish("NN NT TN TT, b<batch>, lda/ldb/ldc<n>, sa/sb/sc<n>, beta1");
  if (batch && *batch < 1) r.fail(detail::str_cat("batch must be positive, got ", *batch));
  GemmProblem p = GemmProblem::dense(mnk[0], mnk[1], mnk[2], ta, tb, dtype, batch.value_or(1));
  p.device = device;
  p.lda = lda.value_or(p.lda);
  p.ldb = ldb.value_or(p.ldb);
  p.ldc = ldc.value_or(p.ldc);
  p.stride_a = sa.value_or(p.stride_a);
  p.stride_b = sb.value_or(p.stride_b);
  p.stride_c = sc.value_or(p.stride_c);
  p.beta_zero = !beta;
  if (!is_floating(dtype)) r.fail("dtype must be f32 or f64");
  r.validated([&] {
    p.validate("gemm");
    return 0;
  });
  return p;
}

// ---- conv2d ----------------------------------------------------------------------------------

std::string conv_descriptor(const ConvProblem& p) {
  std::string s = detail::str_cat("mb", p.n);
  if (p.groups != 1) s += detail::str_cat("g", p.groups);
  s += detail::str_cat("ic", p.c, "ih", p.h);
  if (p.w != p.h) s += detail::str_cat("iw", p.w);
  s += detail::str_cat("oc", p.k, "kh", p.r);
  if (p.s != p.r) s += detail::str_cat("kw", p.s);
  if (p.stride_h != 1) s += detail::str_cat("sh", p.stride_h);
  if (p.stride_w != p.stride_h) s += detail::str_cat("sw", p.stride_w);
  if (p.pad_h != 0) s += detail::str_cat("ph", p.pad_h);
  if (p.pad_w != p.pad_h) s += detail::str_cat("pw", p.pad_w);
  if (p.dil_h != 1) s += detail::str_cat("dh", p.dil_h - 1);
  if (p.dil_w != p.dil_h) s += detail::str_cat("dw", p.dil_w - 1);
  if (p.pass == ConvPass::backward_data) s += ":bwd_d";
  if (p.pass == ConvPass::backward_weights) s += ":bwd_w";
  if (p.has_bias) s += ":bias";
  if (p.fuse_relu) s += ":relu";
  return s + common_parts(p.dtype, p.device);
}

// benchdnn's padding for a given output size: ((o - 1) * s - i + (k - 1) * (d + 1) + 1) / 2.
std::int64_t deduced_pad(std::int64_t o, std::int64_t i, std::int64_t k, std::int64_t s,
                         std::int64_t dil) {
  return ((o - 1) * s - i + (k - 1) * dil + 1) / 2;
}

ConvProblem parse_conv(Reader& r) {
  const auto v = r.letters({"mb", "g", "ic", "ih", "iw", "oc", "oh", "ow", "kh", "kw", "sh", "sw",
                            "ph", "pw", "dh", "dw"});
  ConvProblem p;
  p.n = get(v, "mb", 2);
  p.groups = get(v, "g", 1);
  p.c = need(r, v, "ic");
  p.h = need(r, v, "ih");
  p.w = get(v, "iw", p.h);
  p.k = need(r, v, "oc");
  p.r = need(r, v, "kh");
  p.s = get(v, "kw", p.r);
  p.stride_h = get(v, "sh", 1);
  p.stride_w = get(v, "sw", p.stride_h);
  p.dil_h = get(v, "dh", 0) + 1;
  p.dil_w = get(v, "dw", p.dil_h - 1) + 1;
  p.pad_h = v.count("ph")   ? v.at("ph")
            : v.count("oh") ? deduced_pad(v.at("oh"), p.h, p.r, p.stride_h, p.dil_h)
                            : 0;
  p.pad_w = v.count("pw")   ? v.at("pw")
            : v.count("ow") ? deduced_pad(v.at("ow"), p.w, p.s, p.stride_w, p.dil_w)
                            : p.pad_h;
  switch (r.take_choice({"fwd", "bwd_d", "bwd_w"})) {
    case 1:
      p.pass = ConvPass::backward_data;
      break;
    case 2:
      p.pass = ConvPass::backward_weights;
      break;
    default:
      p.pass = ConvPass::forward;
  }
  p.has_bias = r.take_word("bias");
  p.fuse_relu = r.take_word("relu");
  p.dtype = r.take_dtype_or_half();
  p.device = r.take_device();
  r.finish("fwd bwd_d bwd_w, bias, relu, bf16 f16");
  if (p.fuse_relu && p.pass != ConvPass::forward) r.fail("relu fuses into the forward pass only");
  r.validated([&] {
    p.validate("conv2d");
    return 0;
  });
  if (v.count("oh") && v.at("oh") != p.p())
    r.fail(detail::str_cat("inconsistent sizes: oh", v.at("oh"), " but ih, kh, sh, ph and dh give ",
                           p.p()));
  if (v.count("ow") && v.at("ow") != p.q())
    r.fail(detail::str_cat("inconsistent sizes: ow", v.at("ow"), " but iw, kw, sw, pw and dw give ",
                           p.q()));
  return p;
}

// ---- pooling ---------------------------------------------------------------------------------

const std::vector<std::string_view> kPoolPasses{"fwd_i", "fwd_t", "bwd"};

std::string pool_descriptor(const PoolProblem& p) {
  std::string s = detail::str_cat("mb", p.n, "ic", p.c, "ih", p.h);
  if (p.w != p.h) s += detail::str_cat("iw", p.w);
  if (p.kind == PoolKind::adaptive_avg) {
    s += detail::str_cat("oh", p.oh);
    if (p.ow != p.oh) s += detail::str_cat("ow", p.ow);
  } else {
    s += detail::str_cat("kh", p.kh);
    if (p.kw != p.kh) s += detail::str_cat("kw", p.kw);
    if (p.sh != p.kh) s += detail::str_cat("sh", p.sh);
    if (p.sw != p.sh) s += detail::str_cat("sw", p.sw);
    if (p.ph != 0) s += detail::str_cat("ph", p.ph);
    if (p.pw != p.ph) s += detail::str_cat("pw", p.pw);
  }
  if (p.pass != PoolPass::forward_inference)
    s += ":" + std::string(kPoolPasses[p.pass == PoolPass::forward_training ? 1 : 2]);
  if (p.ceil_mode) s += ":ceil";
  if (!p.count_include_pad) s += ":exclude_pad";
  return s + common_parts(p.dtype, p.device);
}

PoolProblem parse_pool(Reader& r, PoolKind kind) {
  const bool adaptive = kind == PoolKind::adaptive_avg;
  const auto v =
      adaptive
          ? r.letters({"mb", "ic", "ih", "iw", "oh", "ow"})
          : r.letters({"mb", "ic", "ih", "iw", "oh", "ow", "kh", "kw", "sh", "sw", "ph", "pw"});
  const Shape x{get(v, "mb", 2), need(r, v, "ic"), need(r, v, "ih"),
                get(v, "iw", need(r, v, "ih"))};
  const int pass = r.take_choice(kPoolPasses);
  const bool ceil = r.take_word("ceil");
  const bool exclude_pad = r.take_word("exclude_pad");
  const DType dtype = r.take_dtype_or_half();
  const Device device = r.take_device();
  r.finish(adaptive ? "fwd_i fwd_t bwd, bf16 f16" : "fwd_i fwd_t bwd, ceil, exclude_pad, bf16 f16");
  if (exclude_pad && kind != PoolKind::avg) r.fail("exclude_pad applies to avg_pool2d only");
  PoolProblem p;
  if (adaptive) {
    const std::int64_t oh = need(r, v, "oh");
    p = r.validated([&] {
      return make_adaptive_pool_problem(x, {oh, get(v, "ow", oh)}, dtype, device,
                                        "adaptive_avg_pool2d");
    });
  } else {
    const std::int64_t kh = need(r, v, "kh"), kw = get(v, "kw", kh);
    const std::int64_t sh = get(v, "sh", kh), sw = get(v, "sw", sh);
    const std::int64_t ph = get(v, "ph", 0), pw = get(v, "pw", ph);
    p = r.validated([&] {
      return make_pool_problem(kind, x, {kh, kw}, {sh, sw}, {ph, pw}, ceil, !exclude_pad, dtype,
                               device, pool_op_name(kind));
    });
    if (v.count("oh") && v.at("oh") != p.oh)
      r.fail(detail::str_cat("inconsistent sizes: oh", v.at("oh"), " but ih, kh, sh and ph give ",
                             p.oh));
    if (v.count("ow") && v.at("ow") != p.ow)
      r.fail(detail::str_cat("inconsistent sizes: ow", v.at("ow"), " but iw, kw, sw and pw give ",
                             p.ow));
  }
  if (adaptive && ceil) r.fail("ceil applies to max_pool2d and avg_pool2d only");
  p.pass = pass == 1   ? PoolPass::forward_training
           : pass == 2 ? PoolPass::backward
                       : PoolPass::forward_inference;
  return p;
}

// ---- batch_norm2d ----------------------------------------------------------------------------

constexpr double kDefaultEps = 1e-5, kDefaultMomentum = 0.1;

std::string batch_norm_descriptor(const BatchNormProblem& p) {
  std::string s = detail::str_cat("mb", p.n, "ic", p.c, "ih", p.h);
  if (p.w != p.h) s += detail::str_cat("iw", p.w);
  if (p.pass == BatchNormPass::forward_inference) s += ":fwd_i";
  if (p.pass == BatchNormPass::backward) s += ":bwd";
  const bool default_stats = p.pass != BatchNormPass::forward_inference;
  if (p.batch_stats != default_stats) s += p.batch_stats ? ":batch" : ":global";
  if (p.eps != kDefaultEps) s += ":eps" + real(p.eps);
  if (p.momentum != kDefaultMomentum) s += ":mom" + real(p.momentum);
  return s + common_parts(p.dtype, p.device);
}

BatchNormProblem parse_batch_norm(Reader& r) {
  const auto v = r.letters({"mb", "ic", "ih", "iw"});
  const Shape x{get(v, "mb", 2), need(r, v, "ic"), need(r, v, "ih"),
                get(v, "iw", need(r, v, "ih"))};
  const int pass = r.take_choice({"fwd_t", "fwd_i", "bwd"});
  const int stats = r.take_choice({"batch", "global"});
  const double eps = r.take_real("eps").value_or(kDefaultEps);
  const double momentum = r.take_real("mom").value_or(kDefaultMomentum);
  const DType dtype = r.take_dtype();
  const Device device = r.take_device();
  r.finish("fwd_t fwd_i bwd, batch global, eps<x>, mom<x>");
  const BatchNormPass bp = pass == 1   ? BatchNormPass::forward_inference
                           : pass == 2 ? BatchNormPass::backward
                                       : BatchNormPass::forward_training;
  BatchNormProblem p = r.validated([&] {
    return make_batch_norm_problem(x, bp == BatchNormPass::forward_training, momentum, eps, dtype,
                                   device, "batch_norm2d");
  });
  p.pass = bp;
  p.batch_stats = stats >= 0 ? stats == 0 : bp != BatchNormPass::forward_inference;
  return p;
}

// ---- lstm ------------------------------------------------------------------------------------

std::string lstm_descriptor(const LstmProblem& p) {
  std::string s = detail::str_cat("t", p.T, "mb", p.B, "ic", p.I, "hc", p.H);
  if (p.pass == LstmPass::forward_training) s += ":fwd_t";
  if (p.pass == LstmPass::backward) s += ":bwd";
  if (p.two_biases) s += ":hh_bias";
  if (p.has_initial_state) s += ":state";
  return s + common_parts(p.dtype, p.device);
}

LstmProblem parse_lstm(Reader& r) {
  const auto v = r.letters({"t", "mb", "ic", "hc"});
  LstmProblem p;
  p.T = need(r, v, "t");
  p.B = need(r, v, "mb");
  p.I = need(r, v, "ic");
  p.H = need(r, v, "hc");
  const int pass = r.take_choice({"fwd_i", "fwd_t", "bwd"});
  p.pass = pass == 1   ? LstmPass::forward_training
           : pass == 2 ? LstmPass::backward
                       : LstmPass::forward_inference;
  p.two_biases = r.take_word("hh_bias");
  p.has_initial_state = r.take_word("state");
  p.dtype = r.take_dtype();
  p.device = r.take_device();
  r.finish("fwd_i fwd_t bwd, hh_bias, state");
  if (p.T < 1 || p.B < 1 || p.I < 1 || p.H < 1)
    r.fail(
        detail::str_cat("sizes must be positive, got t", p.T, " mb", p.B, " ic", p.I, " hc", p.H));
  return p;
}

std::string trimmed(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

}  // namespace

std::string descriptor(const OpProblem& p) {
  struct Text {
    std::string operator()(const GemmProblem& q) const { return gemm_descriptor(q); }
    std::string operator()(const ConvProblem& q) const { return conv_descriptor(q); }
    std::string operator()(const PoolProblem& q) const { return pool_descriptor(q); }
    std::string operator()(const BatchNormProblem& q) const { return batch_norm_descriptor(q); }
    std::string operator()(const LstmProblem& q) const { return lstm_descriptor(q); }
    std::string operator()(const ElementwiseProblem& q) const { return elementwise_descriptor(q); }
    std::string operator()(const ReduceProblem& q) const { return reduce_descriptor(q); }
    std::string operator()(const SoftmaxProblem& q) const { return softmax_descriptor(q); }
    std::string operator()(const EmbeddingProblem& q) const { return embedding_descriptor(q); }
    std::string operator()(const DropoutProblem& q) const { return dropout_descriptor(q); }
    std::string operator()(const OptimizerProblem& q) const { return optimizer_descriptor(q); }
  };
  return std::visit(Text{}, p);
}

std::string op_descriptor(const OpProblem& p) {
  std::string s = op_name(p);
  s += ':';
  s += descriptor(p);
  return s;
}

OpProblem parse_problem(std::string_view op, std::string_view text) {
  Reader r(op, text);
  if (r.body().empty()) r.fail("empty descriptor");
  if (op == "gemm") return parse_gemm(r);
  if (op == "conv2d") return parse_conv(r);
  if (op == "max_pool2d") return parse_pool(r, PoolKind::max);
  if (op == "avg_pool2d") return parse_pool(r, PoolKind::avg);
  if (op == "adaptive_avg_pool2d") return parse_pool(r, PoolKind::adaptive_avg);
  if (op == "batch_norm2d") return parse_batch_norm(r);
  if (op == "lstm") return parse_lstm(r);
  if (op == "elementwise") return parse_elementwise(r);
  if (op == "reduce") return parse_reduce(r);
  if (op == "softmax") return parse_softmax(r);
  if (op == "embedding") return parse_embedding(r);
  if (op == "dropout") return parse_dropout(r);
  for (OptimOp o : {OptimOp::sgd, OptimOp::adam, OptimOp::grad_norm, OptimOp::grad_scale})
    if (op == optim_op_name(o)) return parse_optimizer(r, o);
  throw std::invalid_argument(
      "bad problem '" + std::string(op) + ":" + std::string(text) + "': unknown op '" +
      std::string(op) +
      "' (expected gemm, conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d, batch_norm2d, "
      "lstm, elementwise, reduce, softmax, embedding, dropout, sgd_update, adam_update, "
      "grad_norm or grad_scale)");
}

OpProblem parse_op_problem(std::string_view text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos)
    throw std::invalid_argument("bad problem '" + std::string(text) +
                                "': expected <op>:<descriptor>, e.g. gemm:64x2048x26752:NT");
  return parse_problem(text.substr(0, colon), text.substr(colon + 1));
}

std::vector<nn::NamedProblem> read_problem_list(std::istream& in, const std::string& source) {
  std::vector<nn::NamedProblem> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string text = trimmed(std::string_view(line).substr(0, line.find('#')));
    if (text.empty()) continue;
    try {
      out.push_back({text, parse_op_problem(text)});
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(source + ":" + std::to_string(n) + ": " + e.what());
    }
  }
  return out;
}

std::vector<nn::NamedProblem> read_problem_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot read the problem file '" + path + "'");
  return read_problem_list(in, path);
}

}  // namespace anvil::harness
