// SPDX-License-Identifier: Apache-2.0
// bf16 and f16 tensors on the CPU: creation, casts both ways (Tensor::to), strided copies and
// views, printing, item(), the pointwise ops (computed in f32, rounded once) and sum/mean/max
// (accumulated wide) against f32 computation, the dispatch decision naming the dtype, and the
// ops without 16-bit kernels refusing them by name.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "engine/core/views.h"
#include "engine/dispatch/elementwise_problem.h"
#include "engine/dispatch/reduce_problem.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"
#include "helpers/gradcheck.h"
#include "helpers/half_bits.h"

using namespace anvil;
using Catch::Contains;
using test::bits_of;
using test::values_f64;

namespace {

// The unit roundoff u = 2^-p of one rounding to nearest with p significant bits: the relative
// error bound 2^-8 for bf16 (8 bits, 7 stored) and 2^-11 for f16 (11 bits, 10 stored).
double unit_roundoff(DType t) {
  return t == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
}

// Each element's own conversion (the scalar converters tested in test_half_types.cpp).
std::vector<std::uint16_t> expected_bits(const std::vector<float>& v, DType t) {
  std::vector<std::uint16_t> out;
  out.reserve(v.size());
  for (float f : v) out.push_back(t == DType::bf16 ? BFloat16(f).bits : Float16(f).bits);
  return out;
}

const std::vector<float> kSpecial = {1.0f,  -2.5f, 1.0f / 3.0f, -0.0f, INFINITY, -INFINITY,
                                     1e-6f, 1e5f,  65520.0f,    3e-8f, -7.75f,   1234.5f};

}  // namespace

TEST_CASE("bf16 and f16 tensors are created, filled and read as float", "[half][tensor]") {
  for (DType t : {DType::bf16, DType::f16}) {
    INFO(dtype_name(t));
    const Tensor z = Tensor::zeros({2, 3}, t);
    CHECK(z.dtype() == t);
    CHECK(z.element_size() == 2);
    CHECK(z.nbytes() == 12);
    CHECK(bits_of(z) == std::vector<std::uint16_t>(6, 0));
    const Tensor third = Tensor::full({3}, 1.0 / 3.0, t);
    // 1/3 rounded once from double: bf16 0x3EAB = 0.333984375, f16 0x3555 = 0.333251953125.
    CHECK(third.select(0, 2).item() == (t == DType::bf16 ? 0.333984375 : 0.333251953125));
    CHECK(bits_of(third)[0] == (t == DType::bf16 ? 0x3EAB : 0x3555));
    const Tensor a = Tensor::arange(5, t);
    CHECK(a.select(0, 4).item() == 4.0);
    Tensor big = Tensor::ones({4}, t);
    big.fill_(1e6);  // beyond f16's range: Inf; bf16 rounds 1e6 to 999424
    CHECK(big.select(0, 0).item() == (t == DType::bf16 ? 999424.0 : INFINITY));
  }
  const Tensor v = Tensor::from_vector(
      std::vector<BFloat16>{BFloat16::from_bits(0x3F80), BFloat16::from_bits(0xC020)}, {2});
  CHECK(v.dtype() == DType::bf16);
  CHECK(v.select(0, 1).item() == -2.5);
  const Tensor h = Tensor::from_vector(std::vector<Float16>{Float16(0.1f)}, {1});
  CHECK(h.dtype() == DType::f16);
  CHECK(h.item() == 0.0999755859375);
  // Random draws are stored rounded: every value is exactly a bf16 value.
  Generator g(3);
  const Tensor r = normal({64}, 0.0, 1.0, DType::bf16, &g);
  CHECK(bits_of(r.to(DType::f32).to(DType::bf16)) == bits_of(r));
}

TEST_CASE("Tensor::to casts f32 to bf16/f16 and back element by element", "[half][tensor]") {
  const Tensor x = Tensor::from_vector(kSpecial, {3, 4});
  for (DType t : {DType::bf16, DType::f16}) {
    INFO(dtype_name(t));
    const Tensor h = x.to(t);
    CHECK(h.dtype() == t);
    CHECK(bits_of(h) == expected_bits(kSpecial, t));
    // Back to f32 is exact: the value of each pattern.
    const Tensor back = h.to(DType::f32);
    for (std::int64_t i = 0; i < 12; ++i) {
      const float want =
          t == DType::bf16 ? BFloat16(kSpecial[i]).to_float() : Float16(kSpecial[i]).to_float();
      const float got = back.data<float>()[i];
      CHECK((got == want && std::signbit(got) == std::signbit(want)));
    }
    // A NaN stays NaN both ways.
    const Tensor n = Tensor::from_vector(std::vector<float>{std::nanf("")}, {1}).to(t);
    CHECK(std::isnan(n.item()));
    // f64 and integers convert too; f64 is rounded once (not through f32 to nearest).
    const double d = 1.0 + std::ldexp(1.0, t == DType::bf16 ? -8 : -11) + std::ldexp(1.0, -40);
    const Tensor from64 = Tensor::from_vector(std::vector<double>{d}, {1}).to(t);
    CHECK(from64.item() > 1.0);
    const Tensor ints = Tensor::from_vector(std::vector<std::int64_t>{-3, 7, 300}, {3}).to(t);
    CHECK(values_f64(ints) == std::vector<double>{-3, 7, 300});
    CHECK(values_f64(ints.to(DType::i32)) == std::vector<double>{-3, 7, 300});
  }
  // bf16 <-> f16 goes through float: 1/3 in bf16 (0.333984375) rounds to f16 0x3558.
  const Tensor b = Tensor::full({1}, 1.0 / 3.0, DType::bf16);
  CHECK(bits_of(b.to(DType::f16))[0] == Float16(0.333984375f).bits);
  CHECK(bits_of(b.to(DType::f16))[0] == 0x3558);
}

TEST_CASE("bf16 views copy, transpose and become contiguous like f32 ones", "[half][tensor]") {
  Generator g(11);
  const Tensor x32 = normal({5, 7}, 0.0, 1.0, DType::f32, &g);
  const Tensor x = x32.to(DType::bf16);
  const Tensor t = x.t();
  CHECK_FALSE(t.is_contiguous());
  const Tensor c = t.contiguous();
  CHECK(c.is_contiguous());
  CHECK(bits_of(c) == bits_of(x32.t().contiguous().to(DType::bf16)));
  const Tensor s = x.slice(1, 1, 7, 3);  // strided columns 1 and 4
  CHECK(bits_of(s) == bits_of(x32.slice(1, 1, 7, 3).contiguous().to(DType::bf16)));
  Tensor dst = Tensor::zeros({7, 5}, DType::f16);
  dst.copy_(t);  // strided bf16 -> dense f16
  CHECK(bits_of(dst) == bits_of(t.to(DType::f32).to(DType::f16)));
}

TEST_CASE("bf16 and f16 tensors print their values", "[half][tensor]") {
  const Tensor b = Tensor::from_vector(std::vector<float>{1.0f / 3.0f, -2.5f, 65520.0f}, {3});
  const std::string sb = b.to(DType::bf16).str();
  CHECK_THAT(sb, Contains("bf16"));
  CHECK_THAT(sb, Contains("[0.333984, -2.5, 65536]"));
  const std::string sh = b.to(DType::f16).str();
  CHECK_THAT(sh, Contains("f16"));
  CHECK_THAT(sh, Contains("[0.333252, -2.5, inf]"));
}

TEST_CASE("pointwise ops on bf16/f16 compute in f32 and round once", "[half][elementwise]") {
  Generator g(5);
  const Tensor a32 = uniform({33, 17}, 0.5, 4.0, DType::f32, &g);
  const Tensor b32 = uniform({33, 17}, -3.0, 3.0, DType::f32, &g);
  for (const char* variant : {"cpu.omp", "ref"}) {
    ForceVariant force("elementwise", variant);
    for (DType t : {DType::bf16, DType::f16}) {
      INFO(variant << " " << dtype_name(t));
      const Tensor a = a32.to(t), b = b32.to(t);
      // The f32 result of the widened 16-bit inputs, rounded once: exactly the kernel's result
      // for the ops that are one f32 operation (add, mul, sub with alpha, scalar forms).
      const Tensor aw = a.to(DType::f32), bw = b.to(DType::f32);
      CHECK(bits_of(ops::add(a, b)) == bits_of(ops::add(aw, bw).to(t)));
      CHECK(bits_of(ops::add(a, b, 0.5)) == bits_of(ops::add(aw, bw, 0.5).to(t)));
      CHECK(bits_of(ops::mul(a, b)) == bits_of(ops::mul(aw, bw).to(t)));
      CHECK(bits_of(ops::unary(EwOp::mul_scalar, a, 3.0)) ==
            bits_of(ops::unary(EwOp::mul_scalar, aw, 3.0).to(t)));
      // Broadcast (a bias row) and a transposed operand.
      const Tensor row = b.select(0, 0);
      CHECK(bits_of(ops::add(a, row)) == bits_of(ops::add(aw, row.to(DType::f32)).to(t)));
      const Tensor at = a.t();
      CHECK(bits_of(ops::mul(at, at)) == bits_of(ops::mul(aw.t(), aw.t()).to(t)));
      // Against the f32 computation on the original (unrounded) inputs, relative to
      // max(1, |f(a)|): the input rounding (relative u, which exp amplifies by |a| <= 4, and
      // log turns into an absolute error u) plus the output rounding u; exp within 6u, the
      // others within 3u.
      const double u = unit_roundoff(t);
      for (EwOp op : {EwOp::exp, EwOp::log, EwOp::sqrt, EwOp::sigmoid, EwOp::tanh}) {
        INFO(ew_name(op));
        const std::vector<double> got = values_f64(ops::unary(op, a));
        const std::vector<double> want = values_f64(ops::unary(op, a32));
        double worst = 0;
        for (std::size_t i = 0; i < got.size(); ++i)
          worst = std::max(worst, std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i])));
        CHECK(worst <= (op == EwOp::exp ? 6.0 : 3.0) * u);
        CHECK(worst > 0);  // the 16-bit path really rounded
      }
    }
  }
}

TEST_CASE("sum and mean of bf16/f16 accumulate wide, max widens exactly", "[half][reduce]") {
  // 4096 ones: a sum kept in bf16 would stop at 256 (256 + 1 rounds back to 256).
  const Tensor ones = Tensor::ones({4096}, DType::bf16);
  CHECK(ops::sum(ones).item() == 4096.0);
  CHECK(ops::sum(ones).dtype() == DType::bf16);
  CHECK(ops::mean(ones).item() == 1.0);
  Generator g(9);
  const Tensor x32 = uniform({6, 301, 5}, -1.0, 1.0, DType::f32, &g);
  for (DType t : {DType::bf16, DType::f16}) {
    INFO(dtype_name(t));
    const Tensor x = x32.to(t);
    const Tensor xw = x.to(DType::f64);  // the exact values of the 16-bit elements
    for (const std::vector<std::int64_t>& dims :
         {std::vector<std::int64_t>{1}, std::vector<std::int64_t>{0, 2},
          std::vector<std::int64_t>{}}) {
      const std::vector<double> got = values_f64(ops::sum(x, dims));
      const std::vector<double> want = values_f64(ops::sum(xw, dims));
      const std::vector<double> absum = values_f64(ops::sum(ops::unary(EwOp::abs, xw), dims));
      for (std::size_t i = 0; i < got.size(); ++i)  // one rounding of the exact sum
        CHECK(std::abs(got[i] - want[i]) <= unit_roundoff(t) * absum[i]);
      const std::vector<double> m = values_f64(ops::mean(x, dims));
      const std::vector<double> mw = values_f64(ops::mean(xw, dims));
      for (std::size_t i = 0; i < m.size(); ++i)
        CHECK(std::abs(m[i] - mw[i]) <= unit_roundoff(t) * std::abs(mw[i]) + 1e-12);
    }
    const auto [values, index] = ops::max(x, 1);
    const auto [values_w, index_w] = ops::max(x.to(DType::f32), 1);
    CHECK(bits_of(values) == bits_of(values_w.to(t)));
    CHECK(values_f64(index) == values_f64(index_w));
  }
}

TEST_CASE("the dispatch decision for a 16-bit problem names its dtype", "[half][dispatch]") {
  ElementwiseProblem ep;
  ep.op = EwOp::add;
  ep.dtype = DType::bf16;
  ep.numel = 10;
  ep.contiguous = true;
  CHECK_THAT(ep.repr(), Contains("bf16"));
  CHECK(elementwise_table().select(ep).name == "cpu.omp");
  ReduceProblem rp;
  rp.op = ReduceOp::sum;
  rp.dtype = DType::f16;
  rp.outer = 1;
  rp.reduce = 10;
  rp.inner = 1;
  CHECK_THAT(rp.repr(), Contains("f16"));
  // cpu.omp reduces f32/f64 only; ref widens (Note [Reductions of 16-bit tensors]).
  CHECK(reduce_table().select(rp).name == "ref");
  const Support omp = reduce_table().find("cpu.omp")->supports(rp);
  CHECK_FALSE(omp.ok);
  CHECK_THAT(omp.reason, Contains("f16"));
}

TEST_CASE("ops without 16-bit kernels refuse bf16/f16 by name", "[half][errors]") {
  // (matmul takes bf16/f16 through the GEMM `ref`: tests/test_autocast.cpp; conv2d and the
  // pools through cpu.onednn.bf16 and the via-f32 variants: tests/test_autocast_conv.cpp.)
  const Tensor a = Tensor::ones({4, 4}, DType::bf16);
  CHECK_THROWS_WITH(softmax(a), Contains("softmax") && Contains("bf16"));
  CHECK_THROWS_WITH(ops::log_softmax(Tensor::ones({2, 3}, DType::f16)),
                    Contains("log_softmax") && Contains("f16"));
  const Tensor img = Tensor::ones({1, 1, 4, 4}, DType::f16);
  CHECK_THROWS_WITH(conv2d(img, Tensor::ones({1, 1, 3, 3}, DType::bf16)),
                    Contains("input is f16 but weight is bf16"));
  // Pooling takes bf16/f16 (docs/kernels/pool_bn.md); an integer image is refused, naming them.
  CHECK_THROWS_WITH(max_pool2d(Tensor::ones({1, 1, 4, 4}, DType::i32), Pool2dOptions{}),
                    Contains("i32") && Contains("bf16 or f16"));
  Tensor p = Tensor::ones({3}, DType::bf16);
  CHECK_THROWS_WITH(p.set_requires_grad(true), Contains("set_requires_grad") && Contains("bf16"));
}
