// model/<name>/<phase>/batch:<b>/threads:<t>: one training step (zero_grad + forward + loss +
// backward + SGD update, the DLBench step of networks.md) and one inference step (forward
// under NoGradGuard) on synthetic N(0,1) inputs with uniform random labels.
#include <chrono>
#include <memory>

#include "bench/bench_support.h"
#include "bench/registrations.h"
#include "engine/anvil/anvil.h"

namespace anvil::bench {
namespace {

double lr_of(const std::string& optimizer_desc) {
  const auto pos = optimizer_desc.find("lr=");
  return pos == std::string::npos ? 0.01 : std::stod(optimizer_desc.substr(pos + 3));
}

void run_model(benchmark::State& state, const std::string& name, bool train, std::int64_t batch,
               int threads) {
  try {
    set_num_threads(threads);
    const models::ModelInfo& info = models::info(name);
    auto net = models::create(name);
    Generator gen(1);
    Shape shape = info.sample_shape;
    shape.insert(shape.begin(), batch);
    Tensor x = normal(shape, 0, 1, DType::f32, &gen);
    Tensor y = randint({batch}, 0, info.num_classes, DType::i64, &gen);
    // The DLBench step: plain SGD (networks.md), whatever the model's real-data optimizer.
    optim::SGD opt(net->parameters(), lr_of(info.optimizer));
    net->train(train);
    auto step = [&] {
      if (train) {
        opt.zero_grad();
        Tensor loss = cross_entropy(net->forward(x), y);
        loss.backward();
        opt.step();
      } else {
        NoGradGuard no_grad;
        Tensor out = net->forward(x);
        benchmark::DoNotOptimize(out.data_ptr());
      }
    };
    step();  // warm-up outside the timed region: page faults, primitive creation
    reset_peak_memory();
    const bool rss_reset = reset_peak_rss();
    const auto t0 = std::chrono::steady_clock::now();
    for (auto _ : state) step();
    const double loop_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double fwd = net->forward_flops(shape);
    const double flops = train ? 3.0 * fwd : fwd;  // backward ~ 2x forward
    state.counters["samples/s"] = benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
    set_pct_peak(state, flops, loop_seconds, threads);
    // With the reset: the process's resident peak during the timed steps (the model, its
    // activations and gradients, plus the libraries' baseline); without: since process start.
    state.counters["peak_rss_MB"] = peak_rss_bytes() / 1048576.0;
    if (!rss_reset) state.SetLabel("peak_rss_MB is the process lifetime peak");
    state.counters["alloc_peak_MB"] = static_cast<double>(memory_stats().peak) / 1048576.0;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace

void register_model_benchmarks() {
  for (const auto& name : options().models) {
    const auto& info = models::info(name);
    for (const char* phase : {"train_step", "inference_step"})
      for (int t : options().threads) {
        const bool train = std::string(phase) == "train_step";
        const std::int64_t batch = info.cpu_batch;
        const std::string bname = detail::str_cat("model/", name, "/", phase, "/batch:", batch, "/threads:", t);
        benchmark::RegisterBenchmark(bname.c_str(), [=](benchmark::State& st) {
          run_model(st, name, train, batch, t);
        })->UseRealTime()->Unit(benchmark::kMillisecond)->MinWarmUpTime(0.5)->MinTime(2.0);
      }
  }
}

}  // namespace anvil::bench
