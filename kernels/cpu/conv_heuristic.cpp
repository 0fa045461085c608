// The conv2d default-selection heuristic (kernels/cpu/conv_heuristic.h).
//
// Note [conv2d heuristic]
// Measured on the 2-core Zen 4 VM (docs/kernels/conv.md: batch 16, forward / backward-data /
// backward-weights timed separately, two runs, the machine shared and noisy), no single order
// wins every layer, so the pass and the filter shape choose. Only rules that held in both runs:
//  1. 3x3, stride 1, no dilation: cpu.onednn.winograd where oneDNN builds it: 1.6-2.3x faster
//     than the best direct variant on every such AlexNet / ResNet-50 / VGG16 layer, all three
//     passes. (Slightly less accurate: the transforms cost a few bits; the variant test allows
//     16x the direct tolerance.)
//  2. First layers (C <= 4, e.g. RGB input): cpu.onednn for forward and backward-weights
//     (1.4-1.8x over cpu.im2col at 1 thread, more at 2); cpu.onednn.nchw for backward-data
//     (oneDNN's blocked-layout backward-data is 2-5x slower there; a first layer's dx is rarely
//     needed in training anyway).
//  3. Otherwise: no preference; the priority order puts cpu.onednn first. cpu.im2col is
//     1.1-1.5x faster on 1x1 layers at 1 thread on a quiet core, but its several parallel
//     regions per chunk (im2col, GEMM, epilogue) lose 2-5x at 2 threads when the VM's cores
//     are oversubscribed, where oneDNN held up; cpu.onednn is the robust default.
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
  if (p.r == 3 && p.s == 3 && p.stride_h == 1 && p.stride_w == 1 && p.dil_h == 1 && p.dil_w == 1) {
    const std::string wino = if_registered("cpu.onednn.winograd");
    if (!wino.empty()) {
      const ConvTable::Variant* v = conv_table().find(wino);
      if (!v->supports || v->supports(p).ok) return wino;
    }
  }
  if (p.c_per_group() <= 4 && p.groups == 1)
    return if_registered(p.pass == ConvPass::backward_data ? "cpu.onednn.nchw" : "cpu.onednn");
  return {};
}

void install_conv_heuristic() { conv_table().set_heuristic(conv_heuristic_pick); }

}  // namespace anvil::kernels
