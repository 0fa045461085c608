// SPDX-License-Identifier: Apache-2.0
// gpu_lstm/<cuda variant>/<forward_training|backward>/<model>:lstm/batch:<b>/device:cuda: one
// LSTM layer of each LSTM model (lstm32, lstm64: I = H = 256 at T = 32 / 64 over the GPU batch
// sweep 128, 256, 512; ptb_small: I = H = 200, T = 20, B = 20; lstm_imdb: I = 32, H = 100,
// T = 500, B = 500) through every CUDA variant of the lstm table (cuda.custom.fused,
// cuda.custom.unfused), timed with CUDA events on the device's stream (time_gpu_loop). The
// backward row times the backward alone (its forward ran once before). Registered with the GPU
// model benchmarks (--anvil_gpu); the report's "LSTM fusion on the GPU" reads these rows.
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "bench/gpu_gemm_bench.h"
#include "bench/registrations.h"
#include "anvil/anvil.h"
#include "engine/core/cuda_backend.h"
#include "engine/dispatch/lstm_problem.h"
#include "engine/ops/lstm.h"
#include "kernels/register.h"

namespace anvil::bench {
namespace {

struct GpuLstmCase {
  std::string model;
  std::int64_t T, B, I, H;
};

std::vector<GpuLstmCase> gpu_lstm_cases() {
  std::vector<GpuLstmCase> v;
  for (std::int64_t b : {128, 256, 512}) {
    v.push_back({"lstm32", 32, b, 256, 256});
    v.push_back({"lstm64", 64, b, 256, 256});
  }
  v.push_back({"ptb_small", 20, 20, 200, 200});
  v.push_back({"lstm_imdb", 500, 500, 32, 100});
  return v;
}

void run_gpu_lstm(benchmark::State& state, const GpuLstmCase& c, LstmPass pass,
                  const std::string& variant) {
  try {
    const Device dev = gpu_bench_device();
    const LstmTable::Variant* v = lstm_table().find(variant);
    if (v == nullptr) {
      state.SkipWithError(("no lstm variant " + variant).c_str());
      return;
    }
    Generator gen(7);
    const double k = 1.0 / std::sqrt(static_cast<double>(c.H));
    auto make = [&](const Shape& s, double a) {
      return uniform(s, -a, a, DType::f32, &gen).to(dev);
    };
    ops::LstmInputs in;
    in.x = make({c.T, c.B, c.I}, 1.0);
    in.w_ih = make({4 * c.H, c.I}, k);
    in.w_hh = make({4 * c.H, c.H}, k);
    in.b_ih = make({4 * c.H}, k);  // one bias, as the models
    const Tensor dy = make({c.T, c.B, c.H}, 1.0);
    ops::LstmForwardResult fwd = ops::lstm_forward(*v, in, /*training=*/true);  // warm-up
    ops::LstmGrads g = ops::lstm_backward(*v, in, fwd, dy, Tensor(), Tensor());
    LstmProblem p = ops::lstm_problem_for(in, pass);
    std::function<void()> step;
    if (pass == LstmPass::backward)
      step = [&] { g = ops::lstm_backward(*v, in, fwd, dy, Tensor(), Tensor()); };
    else
      step = [&] { fwd = ops::lstm_forward(*v, in, true); };
    time_gpu_loop(state, p.flops(), step);
    state.SetLabel(dev.str() + " " + cuda_backend()->device_name(dev.index) + "; " + p.repr());
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace

void register_gpu_lstm_benchmarks() {
  if (!gpu_benchmarks_enabled()) return;
  register_builtin_kernels();
  for (const auto& var : lstm_table().variants()) {
    if (var.device != DeviceType::cuda) continue;
    const std::string variant = var.name;
    for (const GpuLstmCase& c : gpu_lstm_cases())
      for (LstmPass pass : {LstmPass::forward_training, LstmPass::backward}) {
        const std::string name =
            detail::str_cat("gpu_lstm/", variant, "/", lstm_pass_name(pass), "/", c.model,
                            ":lstm/batch:", c.B, "/", gpu_name_suffix());
        benchmark::RegisterBenchmark(
            name.c_str(), [=](benchmark::State& st) { run_gpu_lstm(st, c, pass, variant); })
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.5);
      }
  }
}

}  // namespace anvil::bench
