// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration of the oneDNN 2.6 conv2d variants `cpu.onednn` (direct, oneDNN's blocked layout
// with cached reorders), `cpu.onednn.nchw` (direct on plain NCHW/OIHW descs, no reorders),
// `cpu.onednn.winograd` and `cpu.onednn.bf16` (direct, bf16, only with avx512_bf16).
#include <string>

namespace anvil {
struct ConvProblem;
}

namespace anvil::kernels {
void register_conv_onednn();
// The oneDNN implementation a variant runs for p ("jit:avx512_core", "gemm:jit", ...), or
// "unsupported: <reason>"; for benchmarks and docs/kernels/conv.md.
std::string conv_onednn_impl_name(const std::string& variant, const ConvProblem& p);
}  // namespace anvil::kernels
