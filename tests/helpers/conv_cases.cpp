// SPDX-License-Identifier: Apache-2.0
// The shared conv2d test problems and variant check (tests/helpers/conv_cases.h).
#include "helpers/conv_cases.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>

#include "engine/core/random.h"
#include "engine/core/views.h"

namespace anvil::test {

ConvProblem conv_problem_of(const ConvCase& cc, ConvPass pass, DType dtype, bool bias, bool relu) {
  ConvProblem p;
  p.pass = pass;
  p.dtype = dtype;
  p.n = cc.n;
  p.c = cc.c;
  p.h = cc.h;
  p.w = cc.w;
  p.k = cc.k;
  p.r = cc.r;
  p.s = cc.s;
  p.stride_h = cc.sh;
  p.stride_w = cc.sw;
  p.pad_h = cc.ph;
  p.pad_w = cc.pw;
  p.dil_h = cc.dh;
  p.dil_w = cc.dw;
  p.groups = cc.groups;
  p.has_bias = bias;
  p.fuse_relu = relu && pass == ConvPass::forward;
  return p;
}

ConvArgs conv_args(const ConvProblem& p, const void* x, const void* w, const void* b, void* y,
                   const void* dy, void* dx, void* dw, void* db) {
  return ConvArgs{p, x, w, b, y, dy, dx, dw, db};
}

const std::vector<ConvCase>& odd_conv_cases() {
  static const std::vector<ConvCase> cases = {
      {"odd3x3", 2, 3, 7, 5, 4, 3, 3, 1, 1, 1, 1},
      {"stride2 R3S2", 2, 5, 9, 8, 6, 3, 2, 2, 2, 0, 0},
      {"dilation2", 1, 4, 9, 9, 5, 3, 3, 1, 1, 2, 2, 2, 2},
      {"groups2", 2, 4, 6, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2},
      {"depthwise", 2, 8, 6, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8},
      {"pointwise", 3, 6, 5, 4, 7, 1, 1},
      {"1x1 stride2", 2, 8, 7, 7, 16, 1, 1, 2, 2},
      {"asymmetric", 2, 3, 10, 7, 4, 3, 1, 1, 2, 1, 0, 2, 1},
      {"winograd-able", 2, 16, 8, 8, 16, 3, 3, 1, 1, 1, 1},
      {"batch1 5x5 pad2", 1, 6, 11, 13, 5, 5, 5, 1, 1, 2, 2},
      {"5x5 mixed stride pad dilation", 1, 6, 11, 13, 5, 5, 5, 3, 2, 2, 1, 1, 2},
      {"kernel equals input", 2, 3, 4, 5, 2, 4, 5},
  };
  return cases;
}

void check_conv_variants(VariantHarness& harness, ConvProblem base, DType dtype, bool bias,
                         bool relu, std::uint64_t seed, const ConvTolerance& tolerance,
                         const std::string& label) {
  Generator gen(seed);
  const Device dev = base.device;
  base.dtype = dtype;
  base.has_bias = bias;
  const Shape xs{base.n, base.c, base.h, base.w}, ws{base.k, base.c_per_group(), base.r, base.s};
  const Shape ys{base.n, base.k, base.p(), base.q()};
  // The operands in dtype (on the variant's device) and the same values in f64 for ref.
  auto operand = [&](const Shape& s, Tensor& on_dev, Tensor& f64) {
    const Tensor t = uniform(s, -1.0, 1.0, dtype, &gen);
    f64 = raw::to_dtype(t, DType::f64);
    on_dev = dev.is_cpu() ? t : raw::to_device(t, dev);
  };
  Tensor x, w, b, dy, x64, w64, b64, dy64;
  operand(xs, x, x64);
  operand(ws, w, w64);
  operand({base.k}, b, b64);
  operand(ys, dy, dy64);
  const double mx = max_abs(x64), mw = max_abs(w64), mdy = max_abs(dy64);
  const ConvTable::Variant* ref = conv_table().find("ref");
  REQUIRE(ref != nullptr);
  for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights}) {
    if (relu && pass != ConvPass::forward) continue;  // relu changes only the forward
    ConvProblem p = base;
    p.pass = pass;
    p.fuse_relu = relu && pass == ConvPass::forward;
    ConvProblem pr = p;
    pr.dtype = DType::f64;
    pr.device = Device::cpu();
    Tensor y64 = Tensor::empty(ys, DType::f64), dx64 = Tensor::empty(xs, DType::f64);
    Tensor dw64 = Tensor::empty(ws, DType::f64), db64 = Tensor::empty({p.k}, DType::f64);
    ref->fn(conv_args(pr, x64.data_ptr(), w64.data_ptr(), b64.data_ptr(), y64.data_ptr(),
                      dy64.data_ptr(), dx64.data_ptr(), dw64.data_ptr(), db64.data_ptr()));
    // Error scales: reduction length times the operands' magnitudes.
    double len = 0, scale = 0;
    switch (pass) {
      case ConvPass::forward:
        len = static_cast<double>(p.c_per_group()) * p.r * p.s;
        scale = mx * mw;
        break;
      case ConvPass::backward_data:
        len = static_cast<double>(p.k_per_group()) * p.r * p.s;
        scale = mdy * mw;
        break;
      case ConvPass::backward_weights:
        len = static_cast<double>(p.n) * p.p() * p.q();
        scale = mdy * mx;
        break;
    }
    harness.run(conv_table(), p, label, [&](const ConvTable::Variant& v) {
      const double nan = std::numeric_limits<double>::quiet_NaN();
      auto filled = [&](const Shape& s) {
        const Tensor t = Tensor::full(s, nan, dtype);
        return dev.is_cpu() ? t : raw::to_device(t, dev);
      };
      Tensor y = filled(ys), dx = filled(xs), dw = filled(ws), db = filled({p.k});
      v.fn(conv_args(p, x.data_ptr(), w.data_ptr(), bias ? b.data_ptr() : nullptr, y.data_ptr(),
                     dy.data_ptr(), dx.data_ptr(), dw.data_ptr(), bias ? db.data_ptr() : nullptr));
      auto tol = [&](const char* out) {
        return tolerance(v.name, pass, out, len, std::string(out) == "db" ? mdy : scale);
      };
      switch (pass) {
        case ConvPass::forward:
          return compare("y", y, y64, tol("y"));
        case ConvPass::backward_data:
          return compare("dx", dx, dx64, tol("dx"));
        case ConvPass::backward_weights: {
          std::string bad = compare("dw", dw, dw64, tol("dw"));
          if (bias && bad.empty()) bad = compare("db", db, db64, tol("db"));
          return bad;
        }
      }
      return std::string("unknown pass");
    });
  }
}

}  // namespace anvil::test
