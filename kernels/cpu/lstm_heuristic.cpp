// SPDX-License-Identifier: Apache-2.0
// The lstm default-selection heuristic (kernels/cpu/lstm_heuristic.h).
//
// Note [LSTM heuristic]
// Forward inference on one thread goes to cpu.onednn (oneDNN's LSTM primitive); everything else
// follows the table's order (cpu.fused first). One layer of lstm32 / lstm64 (B = 128,
// I = H = 256), forward without autograd, the two variants interleaved in one process, medians
// of 20 (dev VM, 2026-11-22):
//   1 thread:  T = 32: cpu.fused 47.6 ms, cpu.onednn 44.2 ms;  T = 64: 92.1 vs 87.9 ms
//   2 threads: T = 32: cpu.fused 24.3 ms, cpu.onednn 26.2 ms;  T = 64: 48.8 vs 51.8 ms
// (with two threads cpu.fused's batch-row-parallel recurrence wins). Training keeps cpu.fused,
// whose backward runs from its own saved gates (Note [Fused LSTM saved state]) and which is
// the variant the training comparisons with PyTorch were measured with.
// In the whole inference step the difference is within the dev VM's noise: anvil_bench rows
// forced to each variant
// (`--benchmark_filter=^model/lstmNN/inference_step/batch:128/threads:1/lstm:V`), 5 interleaved
// processes each, median of the per-process means (2026-11-22): lstm32 289.2 ms (cpu.onednn) vs
// 295.3 ms (cpu.fused), lstm64 574.6 vs 569.4 ms.
#include "kernels/cpu/lstm_heuristic.h"

#include <omp.h>

#include "engine/dispatch/lstm_problem.h"

namespace anvil::kernels {

std::string lstm_heuristic_pick(const LstmProblem& p) {
  if (p.device_type() != DeviceType::cpu || p.dtype != DType::f32) return {};
  if (p.pass != LstmPass::forward_inference) return {};
  if (omp_get_max_threads() > 1 && !omp_in_parallel()) return {};
  const LstmTable::Variant* v = lstm_table().find("cpu.onednn");
  if (v == nullptr || (v->supports && !v->supports(p).ok)) return {};
  return "cpu.onednn";
}

void install_lstm_heuristic() { lstm_table().set_heuristic(lstm_heuristic_pick); }

}  // namespace anvil::kernels
