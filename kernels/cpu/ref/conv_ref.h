// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the conv2d `ref` variant (direct loops, f32 and f64, every pass and option).
namespace anvil::kernels {
void register_conv_ref();
}  // namespace anvil::kernels
