// SPDX-License-Identifier: Apache-2.0
// The conv2d default-selection heuristic (kernels/cpu/conv_heuristic.h).
//
// Note [conv2d heuristic]
// Measured on the 2-core Zen 4 VM (docs/kernels/conv.md: batch 16, forward / backward-data /
// backward-weights timed separately, two runs, the machine shared and noisy), no single order
// wins every layer, so the pass and the filter shape choose. Only rules that held in both runs:
//  1. First layers (C <= 4, e.g. RGB input): cpu.onednn for forward and backward-weights
//     (1.4-1.8x over cpu.im2col at 1 thread, more at 2); cpu.onednn.nchw for backward-data
//     (oneDNN's blocked-layout backward-data is 2-5x slower there). This rule comes before the
//     winograd one: on VGG16's first layer (3->64 3x3) winograd is 1.6-2.7x slower than these
//     (docs/results/conv_variants_per_layer_2026-11-21.md).
//  2. 3x3, stride 1, no dilation: cpu.onednn.winograd where oneDNN builds it: 1.4-3.5x faster
//     than the best direct variant on every other such AlexNet / ResNet-50 / VGG16 layer, all
//     three passes. (Slightly less accurate: the transforms cost a few bits; the variant test
//     allows 16x the direct tolerance.)
//  3. 1x1 convolutions: cpu.onednn.nchw. On ResNet-50's 1x1 layers the blocked cpu.onednn pays
//     its reorders on every call and is 1.3-2.0x behind; cpu.onednn.nchw and cpu.im2col are
//     within 1.2x of each other (im2col ahead on backward-weights), but cpu.im2col's several
//     parallel regions per chunk lose 2-5x at 2 threads when the VM's cores are oversubscribed,
//     where oneDNN held up.
//  4. Otherwise: no preference; the table's order puts cpu.onednn first.
// Every pick is only a preference: a variant that does not support the problem is passed over
// (selection step 3 requires support), and forcing or autotune override it.
#include "kernels/cpu/conv_heuristic.h"

#include "engine/dispatch/conv_problem.h"

namespace anvil::kernels {
namespace {

std::string if_registered(const char* name) {
  return conv_table().find(name) ? std::string(name) : std::string();
}

}  // namespace

std::string conv_heuristic_pick(const ConvProblem& p) {
  if (p.device_type() != DeviceType::cpu || p.dtype != DType::f32) return {};
  if (p.c_per_group() <= 4 && p.groups == 1)  // rule 1: first layers
    return if_registered(p.pass == ConvPass::backward_data ? "cpu.onednn.nchw" : "cpu.onednn");
  if (p.r == 3 && p.s == 3 && p.stride_h == 1 && p.stride_w == 1 && p.dil_h == 1 && p.dil_w == 1) {
    std::string wino = if_registered("cpu.onednn.winograd");  // rule 2
    if (!wino.empty()) {
      const ConvTable::Variant* v = conv_table().find(wino);
      if (!v->supports || v->supports(p).ok) return wino;
    }
  }
  if (p.r == 1 && p.s == 1 && p.groups == 1) return if_registered("cpu.onednn.nchw");  // rule 3
  return {};
}

void install_conv_heuristic() { conv_table().set_heuristic(conv_heuristic_pick); }

}  // namespace anvil::kernels
