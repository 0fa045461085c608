// SPDX-License-Identifier: Apache-2.0
// The 16-bit conv2d fallbacks of conv_half.h, all three passes: the pass's inputs widened to
// f32 (exact), the f32 variant cpu.im2col, each output rounded to the problem's dtype once
// (conv_widened.h), the numerics of Note [Half GEMM via f32].
#include "kernels/cpu/bf16/conv_half.h"

#include <string>

#include "engine/core/error.h"
#include "engine/core/half_types.h"
#include "engine/dispatch/conv_problem.h"
#include "kernels/cpu/bf16/conv_widened.h"

namespace anvil::kernels {
namespace {

// The f32 variant the fallbacks run: our own, so it exists on every CPU build.
const ConvTable::Fn& im2col_f32_fn() {
  static const ConvTable::Fn fn = [] {
    const ConvTable::Variant* v = conv_table().find("cpu.im2col");
    if (v == nullptr)
      throw Error("conv2d cpu.*_via_f32: the f32 variant cpu.im2col is not registered");
    return v->fn;
  }();
  return fn;
}

template <typename Format>
void conv_via_f32(const ConvArgs& a, DType expected, const char* where) {
  conv_widened::run<Format, float>(a, expected, DType::f32, im2col_f32_fn(), where);
}

template <typename Format>
void add_via_f32(const char* name, DType dtype, const char* description) {
  const std::string where = std::string("conv2d ") + name;
  conv_table().add({
      .name = name,
      .supports =
          [name, dtype](const ConvProblem& p) {
            if (p.dtype != dtype)
              return Support::no(detail::str_cat(name, " handles ", dtype_name(dtype),
                                                 " only, not ", dtype_name(p.dtype)));
            // A fused relu is cpu.im2col's, before the rounding (the same values: rounding
            // keeps the sign).
            if (p.device_type() != DeviceType::cpu) return Support::no("runs on the CPU only");
            return Support::yes();
          },
      .fn = [where, dtype](const ConvArgs& a) { conv_via_f32<Format>(a, dtype, where.c_str()); },
      .description = description,
  });
}

}  // namespace

void register_conv_half() {
  add_via_f32<half_detail::BFloat16Format>(
      "cpu.bf16_via_f32", DType::bf16,
      "bf16 fallback: widen to f32, cpu.im2col, round the outputs to bf16");
  add_via_f32<half_detail::Float16Format>(
      "cpu.f16_via_f32", DType::f16, "f16: widen to f32, cpu.im2col, round the outputs to f16");
}

}  // namespace anvil::kernels
