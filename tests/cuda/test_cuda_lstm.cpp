// SPDX-License-Identifier: Apache-2.0
// The CUDA LSTM variants (cuda.custom.fused, cuda.custom.unfused, cuda.cudnn) against the CPU `ref`
// composition: outputs, final states and every gradient of a weighted loss, at T in {1, 7, 32}
// with batch, input and hidden sizes that are not multiples of 32, on the LSTM models' layer
// shapes (lstm32/64: I = H = 256, B = 128; ptb_small: I = H = 200, B = 20; lstm_imdb: I = 32,
// H = 100, T = 500 at B = 64), in f32 and, against ref in f64, to 1e-9; each variant must run at
// least kMinProblems problems; and a few training steps of every LSTM model on the GPU against
// the same steps on the CPU; a small LSTM language model trained with the PTB recipe on both
// devices ends at the same perplexity (3 %). Runs only with a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/random.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/lstm_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/nn/init.h"
#include "engine/nn/recurrent.h"
#include "models/lstm_language_model.h"
#include "helpers/lm_training.h"
#include "helpers/lstm_layer_case.h"
#include "helpers/lstm_variant_check.h"
#include "helpers/variant_harness.h"
#include "engine/optim/optimizer.h"
#include "kernels/register.h"
#include "models/language_model_eval.h"
#include "models/training_step.h"

using namespace anvil;
using anvil::test::LayerCase;
using anvil::test::run_layer;

namespace {

const Device kGpu = Device::cuda(0);
constexpr int kMinProblems = 12;

// One case with the oracle (`ref`, Note [LSTM oracle]) on the CPU and the lstm variant forced now
// on the GPU; tolerances relative to the sizes. "" when all agree.
std::string check_case(const std::string& variant, const LayerCase& c, DType dt, double out_tol,
                       double grad_tol) {
  const test::LstmRun r = test::run_lstm_oracle(c, dt, 5 + c.H);
  test::LstmRun v;
  {
    ForceVariant gemm("gemm", "cuda.cublas");  // IEEE FP32 (TF32 is opt-in anyway)
    v = test::run_lstm_case(c, dt, kGpu, 5 + c.H);
  }
  std::string bad;
  if (v.out.y.device() != kGpu) bad += "the output is not on the GPU; ";
  bad += test::compare_lstm_runs(r, v, out_tol, grad_tol);
  NoGradGuard no_grad;
  const LstmLayerOutput inf = run_layer(v.in);
  // The own variants run the same kernels in inference; cuDNN may pick other ones.
  bad += test::compare("inference y", inf.y, v.out.y,
                       variant.rfind("cuda.custom", 0) == 0 ? 0.0 : out_tol);
  return bad;
}

std::vector<std::string> cuda_lstm_variants() {
  register_builtin_kernels();
  (void)Tensor::zeros({1}, DType::f32, kGpu);  // loads the backend (its variants)
  std::vector<std::string> names;
  for (const auto& v : lstm_table().variants())
    if (v.device == DeviceType::cuda) names.push_back(v.name);
  return names;
}

}  // namespace

TEST_CASE("every CUDA lstm variant matches ref at T = 1, 7, 32 and the models' shapes",
          "[cuda][lstm]") {
  const std::vector<LayerCase> cases = {
      {1, 5, 13, 19, false, false},      {7, 5, 13, 19, true, true},
      {32, 33, 17, 45, true, false},     {7, 1, 1, 1, false, false},
      {32, 3, 70, 37, false, true},      {1, 130, 65, 31, true, true},
      {32, 128, 256, 256, false, false},  // lstm32 (and lstm64's layer; T = 32)
      {20, 20, 200, 200, false, false},   // ptb_small
      {500, 64, 32, 100, false, false},   // lstm_imdb's T and layer at B = 64
  };
  const auto names = cuda_lstm_variants();
  REQUIRE(names.size() >= 3);
  // Every CUDA variant runs every case (tests/helpers/variant_harness.h): 9 in f32, 5 in f64.
  test::VariantHarness harness(lstm_table(), DeviceType::cuda, kMinProblems);
  harness.require_all();
  for (const LayerCase& c : cases) {
    // f32: GEMMs in a different order than the CPU's; the error grows with T and B.
    const double scale = 1.0 + std::sqrt(static_cast<double>(c.T * c.B));
    harness.run(lstm_table(), test::lstm_passes(c, DType::f32, kGpu), "f32",
                [&](const LstmTable::Variant& v) {
                  return check_case(v.name, c, DType::f32,
                                    2e-5 * (1.0 + std::sqrt(static_cast<double>(c.T))),
                                    3e-5 * scale);
                });
  }
  // f64: the same kernels in double against ref in double.
  for (const LayerCase& c : {cases[0], cases[1], cases[2], cases[4], cases[5]})
    harness.run(lstm_table(), test::lstm_passes(c, DType::f64, kGpu), "f64",
                [&](const LstmTable::Variant& v) {
                  return check_case(v.name, c, DType::f64, 1e-11, 1e-9);
                });
  harness.finish();
}

TEST_CASE("the default CUDA lstm variant is cuda.custom.fused", "[cuda][lstm]") {
  (void)cuda_lstm_variants();
  LstmProblem p{7, 5, 13, 19, false, false, LstmPass::forward_training, DType::f32, kGpu};
  CHECK(lstm_table().select(p).name == "cuda.custom.fused");
}

namespace {
std::vector<double> train_losses(const std::string& model, std::int64_t batch, Device device,
                                 int steps) {
  models::TrainingStep s(model, batch, /*seed=*/2, true, device);
  // The CPU run draws any dropout mask from the Philox stream of cuda.custom.dropout (`ref`); the
  // GPU run's GEMMs are IEEE FP32 cuBLAS. A forced variant of the other device is an error, so
  // each force covers only its own device's run.
  std::unique_ptr<ForceVariant> drop, gemm;
  if (device.is_cpu()) drop = std::make_unique<ForceVariant>("dropout", "ref");
  if (device.is_cuda()) gemm = std::make_unique<ForceVariant>("gemm", "cuda.cublas");
  std::vector<double> l;
  for (int i = 0; i < steps; ++i) {
    s.train_step();
    l.push_back(s.last_loss());
  }
  return l;
}
}  // namespace

TEST_CASE("each LSTM model trains a few steps on the GPU as on the CPU", "[cuda][lstm][models]") {
  for (const auto& [model, batch] : std::vector<std::pair<std::string, std::int64_t>>{
           {"lstm32", 8}, {"lstm64", 4}, {"ptb_small", 20}, {"lstm_imdb", 8}}) {
    INFO(model << " batch " << batch);
    REQUIRE(models::info(model).gpu_path);
    const auto cpu = train_losses(model, batch, Device::cpu(), 3);
    const auto gpu = train_losses(model, batch, kGpu, 3);
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      INFO("step " << i);
      CHECK(gpu[i] == Approx(cpu[i]).epsilon(1e-3));
    }
  }
}

namespace {

// A token stream with structure to learn: next = (3 * current + noise) mod V, noise in {0, 1, 2}.
std::vector<std::int64_t> markov_stream(std::int64_t n, std::int64_t vocab, std::uint64_t seed) {
  Generator g(seed);
  const Tensor noise = randint({n}, 0, 3, DType::i64, &g);
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  std::int64_t t = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    t = (3 * t + noise.data<std::int64_t>()[i]) % vocab;
    v[static_cast<std::size_t>(i)] = t;
  }
  return v;
}

// `epochs` epochs of truncated BPTT (B = T = 10) (SGD lr 1, clip 5, the PTB recipe) on `device`,
// then the held-out perplexity, state carried across windows as anvil train does.
// With `window_losses`, every training window's loss is appended to it.
double lm_perplexity(Device device, const std::vector<std::int64_t>& train,
                     const std::vector<std::int64_t>& test, std::int64_t vocab, int epochs,
                     std::vector<double>* window_losses = nullptr) {
  Generator gen(5);
  models::LstmLanguageModel net(vocab, 32, 32, 2, /*two_biases=*/false, &gen);
  for (auto& p : net.parameters()) nn::init::uniform_(p, -0.1, 0.1, &gen);
  if (device.is_cuda()) net.to(device);
  // IEEE FP32 cuBLAS on the GPU; forced for the GPU run only (the CPU's GEMMs cannot run it).
  std::unique_ptr<ForceVariant> gemm;
  if (device.is_cuda()) gemm = std::make_unique<ForceVariant>("gemm", "cuda.cublas");
  optim::SGD opt(net.parameters(), 1.0);
  const std::int64_t B = 10, T = 10;
  anvil::test::train_language_model(net, opt, train, B, T, epochs, device, window_losses);
  return models::evaluate_language_model(net, test, B, T, device).perplexity;
}

}  // namespace

// Note [LM perplexity is chaotic after 3 epochs]
// With this recipe the model sits on the uniform plateau (window loss ~ T log V = 39.1) for about
// two epochs and leaves it around window 250-300. Leaving the plateau amplifies rounding
// differences about 1.7x per window: after 3 epochs (360 windows) 18 combinations of correct
// CPU kernels (lstm cpu.fused/ref/cpu.onednn x gemm default/cpu.eigen/ref x softmax default/ref)
// end between perplexity 4.81 and 5.77 (base 5.376, up to 10.6 % away; cpu.eigen alone happens to
// land 0.13 % away), and a 1e-7 relative perturbation of the initial weights gives sd 7 %. After
// 5 epochs the same combinations stay within 1.6 % (perturbations: sd 0.6 %), so the end
// perplexity is compared after 5 epochs; the exact comparison is the one of the first epoch's
// window losses (plateau, no clipping yet), where all those CPU combinations agree to 1e-7 and
// a wrong carried state (reset, swapped h/c, layers swapped, one window stale) moves a window's
// loss by 3e-5 .. 5e-4.

TEST_CASE("a small LSTM language model's first epoch matches the CPU's window by window",
          "[cuda][lstm][ptb]") {
  const std::int64_t V = 50;
  const auto train = markov_stream(20 * 20 * 30, V, 1);
  const auto test = markov_stream(20 * 20 * 5, V, 2);
  std::vector<double> cpu, gpu;
  (void)lm_perplexity(Device::cpu(), train, test, V, /*epochs=*/1, &cpu);
  (void)lm_perplexity(kGpu, train, test, V, /*epochs=*/1, &gpu);
  REQUIRE(cpu.size() == gpu.size());
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    INFO("window " << i);
    CHECK(gpu[i] == Approx(cpu[i]).epsilon(1e-5));
  }
}

TEST_CASE("a small LSTM language model reaches the CPU's perplexity on the GPU",
          "[cuda][lstm][ptb]") {
  // The PTB recipe on a synthetic stream (the GPU kit carries no PTB files): the same weights and
  // data on both devices, five epochs (Note [LM perplexity is chaotic after 3 epochs]); the GPU
  // run must end within 3 % of the CPU run's perplexity, and the CPU run must have learned the
  // stream's structure (ideal perplexity 3, uniform 50; the CPU run measures 3.83).
  const std::int64_t V = 50;
  const auto train = markov_stream(20 * 20 * 30, V, 1);
  const auto test = markov_stream(20 * 20 * 5, V, 2);
  // 3 % is about twice the spread of the 18 CPU kernel combinations after 5 epochs (the Note);
  // a single calibration run would be a sample of that spread, not a bound, so none is made.
  const double cpu = lm_perplexity(Device::cpu(), train, test, V, /*epochs=*/5);
  const double gpu = lm_perplexity(kGpu, train, test, V, /*epochs=*/5);
  WARN("perplexity: cpu " << cpu << ", gpu " << gpu);
  CHECK(cpu < 4.5);
  CHECK(gpu == Approx(cpu).epsilon(0.03));
}
