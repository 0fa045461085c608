// SPDX-License-Identifier: Apache-2.0
// Where anvil's training step spends its time: the step of bench/model_bench.cpp (zero_grad +
// forward + cross-entropy + backward + SGD), each part timed on its own, so that it can be set
// beside the PyTorch peer's `--breakdown` (bench/peers/pytorch_models.py). A diagnostic, built
// as build/bench/anvil_phases (bench/CMakeLists.txt):
//   OMP_WAIT_POLICY=PASSIVE build/bench/anvil_phases fcn5 1 10   (model, threads, timed steps)
// Prints one JSON object: the median seconds of each part.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "anvil/anvil.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace anvil;
  using Clock = std::chrono::steady_clock;
  const std::string name = argc > 1 ? argv[1] : "fcn5";
  const int threads = argc > 2 ? std::stoi(argv[2]) : 1;
  const int steps = argc > 3 ? std::stoi(argv[3]) : 10;
  register_builtin_kernels();
  set_num_threads(threads);
  const models::ModelInfo& info = models::info(name);
  auto net = models::create(name);
  Generator gen(1);
  Shape shape = info.sample_shape;
  shape.insert(shape.begin(), info.cpu_batch);
  Tensor x = normal(shape, 0, 1, DType::f32, &gen);
  Tensor y = randint({info.cpu_batch}, 0, info.num_classes, DType::i64, &gen);
  // Plain SGD lr 0.01 as in model_bench.cpp (fcn_r's own lr 0.05 is not mirrored here).
  optim::SGD opt(net->parameters(), 0.01);
  net->train(true);
  std::map<std::string, std::vector<double>> t;
  for (int i = 0; i <= steps; ++i) {  // step 0 is the warm-up
    const auto t0 = Clock::now();
    opt.zero_grad();
    const auto t1 = Clock::now();
    Tensor loss = cross_entropy(net->forward(x), y);
    const auto t2 = Clock::now();
    loss.backward();
    const auto t3 = Clock::now();
    opt.step();
    const auto t4 = Clock::now();
    if (i == 0) continue;
    auto s = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    t["zero_grad"].push_back(s(t0, t1));
    t["forward_loss"].push_back(s(t1, t2));
    t["backward"].push_back(s(t2, t3));
    t["sgd_step"].push_back(s(t3, t4));
    t["total"].push_back(s(t0, t4));
  }
  std::printf("{\"peer\": \"anvil\", \"model\": \"%s\", \"threads\": %d, \"steps\": %d",
              name.c_str(), threads, steps);
  for (const auto& [k, v] : t) std::printf(", \"%s_median_s\": %.6f", k.c_str(), median(v));
  std::printf("}\n");
  return 0;
}
