// SPDX-License-Identifier: Apache-2.0
#pragma once
// A 16-bit (bf16/f16) conv2d problem run through a kernel of a wider type: the pass's inputs
// widened to dense buffers of Wide (float or double; exact), the wide kernel run on them, each
// output rounded to the 16-bit type once (from double through round-to-odd, so the one rounding
// is correct). Used by the fallbacks cpu.bf16_via_f32 / cpu.f16_via_f32 (Wide = float, the f32
// cpu.im2col, Note [Half GEMM via f32]) and by `ref` on 16-bit problems (Wide = double, ref's own
// f64 loops: the exact sums rounded once). NCHW / KCRS, as the problem's.
#include <cstdint>
#include <type_traits>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/half_types.h"
#include "engine/dispatch/conv_problem.h"

namespace anvil::kernels::conv_widened {

// n 16-bit elements as Wide (empty when the pointer is null: an operand the pass does not read).
template <typename Format, typename Wide>
std::vector<Wide> widen(const void* src, std::int64_t n) {
  std::vector<Wide> out;
  if (src == nullptr) return out;
  out.resize(static_cast<std::size_t>(n));
  const auto* h = static_cast<const std::uint16_t*>(src);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<Wide>(Format::to_float(h[i]));
  return out;
}

template <typename Format, typename Wide>
void narrow(const std::vector<Wide>& src, void* dst) {
  if (dst == nullptr) return;
  auto* h = static_cast<std::uint16_t*>(dst);
  for (std::size_t i = 0; i < src.size(); ++i) {
    if constexpr (std::is_same_v<Wide, double>)
      h[i] = Format::from_float(half_detail::double_to_float_round_odd(src[i]));
    else
      h[i] = Format::from_float(src[i]);
  }
}

template <typename Wide>
Wide* data_or_null(std::vector<Wide>& v) {
  return v.empty() ? nullptr : v.data();
}

// Runs the 16-bit problem a.problem (dtype bf16 or f16, checked against `expected`) with `wide`,
// a conv2d variant function for the dtype `wide_dtype` (f32 or f64, matching Wide).
template <typename Format, typename Wide>
void run(const ConvArgs& a, DType expected, DType wide_dtype, const ConvTable::Fn& wide,
         const char* where) {
  const ConvProblem& p = a.problem;
  p.validate(where);
  ANVIL_CHECK(p.dtype == expected, where, "expects ", dtype_name(expected), ", got ",
              dtype_name(p.dtype));
  const std::int64_t nx = p.n * p.c * p.h * p.w, nw = p.k * p.c_per_group() * p.r * p.s;
  const std::int64_t ny = p.n * p.k * p.p() * p.q();
  const bool fwd = p.pass == ConvPass::forward, bwd_data = p.pass == ConvPass::backward_data;
  const bool bwd_weights = p.pass == ConvPass::backward_weights;
  const bool bias = p.has_bias && !bwd_data;
  std::vector<Wide> x = widen<Format, Wide>(bwd_data ? nullptr : a.x, nx);
  std::vector<Wide> w = widen<Format, Wide>(bwd_weights ? nullptr : a.w, nw);
  std::vector<Wide> b = widen<Format, Wide>(fwd && bias ? a.b : nullptr, p.k);
  std::vector<Wide> dy = widen<Format, Wide>(fwd ? nullptr : a.dy, ny);
  std::vector<Wide> y(fwd ? static_cast<std::size_t>(ny) : 0);
  std::vector<Wide> dx(bwd_data ? static_cast<std::size_t>(nx) : 0);
  std::vector<Wide> dw(bwd_weights ? static_cast<std::size_t>(nw) : 0);
  std::vector<Wide> db(bwd_weights && bias ? static_cast<std::size_t>(p.k) : 0);
  ConvArgs wa{p,
              data_or_null(x),
              data_or_null(w),
              data_or_null(b),
              data_or_null(y),
              data_or_null(dy),
              data_or_null(dx),
              data_or_null(dw),
              data_or_null(db)};
  wa.problem.dtype = wide_dtype;
  wide(wa);
  narrow<Format, Wide>(y, a.y);
  narrow<Format, Wide>(dx, a.dx);
  narrow<Format, Wide>(dw, a.dw);
  narrow<Format, Wide>(db, a.db);
}

}  // namespace anvil::kernels::conv_widened
