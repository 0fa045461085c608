// SPDX-License-Identifier: Apache-2.0
// The `anvil train` loop (tools/anvil/trainer.h) on real Fashion-MNIST data: resuming from a
// checkpoint gives the same run as not stopping (Note [Resuming a run]), the allocator's peak is
// the same in every epoch after the first (memory stays flat), and the metrics are filled in.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "anvil/anvil.h"
#include "helpers/datasets.h"
#include "tools/anvil/trainer.h"

using namespace anvil;

namespace {

tools::TrainConfig small_run(const std::string& model) {
  tools::TrainConfig c;
  c.model = model;
  c.dataset = test::fashion_mnist_dir();
  c.subset = 1200;  // 960 training, 240 validation, 1200 test images
  c.batch = 64;
  c.optimizer = "adam";
  c.lr = 1e-3;
  c.threads = 1;  // one thread: the same reduction order in every run
  c.seed = 5;
  return c;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("anvil_test_train_" + name)).string();
}

}  // namespace

TEST_CASE("anvil train: resuming from a checkpoint repeats the uninterrupted run exactly",
          "[train][real_data]") {
  std::ostringstream log;
  const std::string ckpt = temp_path("resume.safetensors");

  auto straight = small_run("mlp_mnist");  // dropout: the generator state must be restored too
  straight.epochs = 3;
  const auto full = tools::run_training(straight, log);

  auto first = small_run("mlp_mnist");
  first.epochs = 1;
  first.checkpoint = ckpt;
  tools::run_training(first, log);
  auto rest = small_run("mlp_mnist");
  rest.epochs = 3;
  rest.resume = ckpt;
  const auto resumed = tools::run_training(rest, log);
  std::filesystem::remove(ckpt);

  REQUIRE(resumed.first_epoch == 2);
  REQUIRE(resumed.epochs.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    INFO("epoch " << resumed.epochs[i].epoch);
    REQUIRE(resumed.epochs[i].train_loss == full.epochs[i + 1].train_loss);  // bit-identical
    REQUIRE(resumed.epochs[i].val_metric == full.epochs[i + 1].val_metric);
  }
  REQUIRE(resumed.test_loss == full.test_loss);
  REQUIRE(resumed.test_metric == full.test_metric);
}

TEST_CASE(
    "anvil train: AdamW with weight decay groups and a warm-up cosine schedule resumes "
    "exactly",
    "[train][real_data]") {
  std::ostringstream log;
  const std::string ckpt = temp_path("resume_adamw.safetensors");
  auto config = [](int epochs) {
    auto c = small_run("mlp_mnist");
    c.optimizer = "adamw";
    c.weight_decay = 0.05;
    c.lr_schedule = "cosine";
    c.cosine_epochs = 2;  // the same schedule in the 1-epoch and the 2-epoch run
    c.warmup_steps = 4;
    c.epochs = epochs;
    return c;
  };
  const auto full = tools::run_training(config(2), log);
  auto first = config(1);
  first.checkpoint = ckpt;
  const auto one = tools::run_training(first, log);
  auto rest = config(2);
  rest.resume = ckpt;
  const auto resumed = tools::run_training(rest, log);
  // A resume with another schedule is refused, naming it.
  auto other = config(2);
  other.resume = ckpt;
  other.cosine_epochs = 3;
  REQUIRE_THROWS_WITH(tools::run_training(other, log),
                      Catch::Contains("anvil_train.lr_schedule = cosine over 2 epoch(s), warm-up "
                                      "4 steps but this run has cosine over 3 epoch(s)"));
  std::filesystem::remove(ckpt);

  // 960 training images, batch 64: 15 steps per epoch. Epoch 1 starts warming up at lr/5, epoch
  // 2 at the cosine's middle: lr (1 + cos(pi 15/30)) / 2 = lr / 2.
  REQUIRE(one.epochs[0].lr == Approx(1e-3 / 5));
  REQUIRE(full.epochs[1].lr == Approx(1e-3 / 2).epsilon(1e-12));
  REQUIRE(resumed.epochs.size() == 1);
  REQUIRE(resumed.epochs[0].lr == full.epochs[1].lr);
  REQUIRE(resumed.epochs[0].train_loss == full.epochs[1].train_loss);  // bit-identical
  REQUIRE(resumed.epochs[0].val_metric == full.epochs[1].val_metric);
  REQUIRE(resumed.test_loss == full.test_loss);
  REQUIRE_THAT(log.str(), Catch::Contains("optimizer: adamw, weight decay 0.05 (none on biases"));
}

TEST_CASE("anvil train: --lr-schedule multistep multiplies the lr at the milestone epochs",
          "[train][real_data]") {
  std::ostringstream log;
  auto c = small_run("mlp_mnist");
  c.epochs = 3;
  c.lr = 0.1;
  c.lr_schedule = "multistep";
  c.milestones = {2, 1};  // any order, as PyTorch's
  c.lr_decay = 0.5;
  const auto r = tools::run_training(c, log);
  REQUIRE(r.epochs.size() == 3);
  CHECK(r.epochs[0].lr == Approx(0.1).epsilon(1e-12));
  CHECK(r.epochs[1].lr == Approx(0.05).epsilon(1e-12));
  CHECK(r.epochs[2].lr == Approx(0.025).epsilon(1e-12));
  CHECK_THAT(log.str(), Catch::Contains("multistep x0.5 at epoch(s) 2,1"));
  c.milestones.clear();
  CHECK_THROWS_WITH(tools::run_training(c, log), Catch::Contains("needs --milestones"));
  c.lr_schedule = "cosine";
  c.milestones = {1};
  c.lr_decay = 1;
  CHECK_THROWS_WITH(tools::run_training(c, log),
                    Catch::Contains("--milestones applies to --lr-schedule multistep"));
}

TEST_CASE("anvil train: metrics are reported and memory stays flat across epochs",
          "[train][real_data]") {
  std::ostringstream log;
  auto c = small_run("mlp_mnist");
  c.epochs = 4;
  c.target_accuracy = 0.5;
  const auto wall0 = std::chrono::steady_clock::now();
  const auto r = tools::run_training(c, log);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  std::printf(
      "anvil train (mlp_mnist, 960 Fashion-MNIST images, 4 epochs): test accuracy %.3f, "
      "allocator peak per epoch %.1f %.1f %.1f %.1f MB\n",
      r.test_metric, r.epochs[0].allocator_peak_bytes / 1048576.0,
      r.epochs[1].allocator_peak_bytes / 1048576.0, r.epochs[2].allocator_peak_bytes / 1048576.0,
      r.epochs[3].allocator_peak_bytes / 1048576.0);
  REQUIRE(r.train_samples == 960);
  REQUIRE(r.val_samples == 240);
  REQUIRE(r.test_samples == 1200);
  REQUIRE(r.test_metric > 0.6);  // well above chance (0.1) after 4 epochs on 960 images
  REQUIRE(r.epochs.back().train_loss < r.epochs.front().train_loss);
  // The timings are parts of the call's own wall time, and each epoch's share adds up.
  INFO("wall " << wall << " s, training " << r.training_seconds << " s, testing "
               << r.testing_seconds << " s");
  REQUIRE(r.time_to_target_seconds.has_value());
  REQUIRE(*r.time_to_target_seconds > 0);
  REQUIRE(*r.time_to_target_seconds <= r.training_seconds);
  REQUIRE(r.training_seconds > 0);
  REQUIRE(r.testing_seconds > 0);
  REQUIRE(r.training_seconds + r.testing_seconds <= wall);
  double epoch_sum = 0;
  for (const auto& e : r.epochs) epoch_sum += e.train_seconds;
  REQUIRE(epoch_sum == Approx(r.training_seconds).epsilon(1e-9));
  // Resident peak: at least the allocator's peak (those bytes are written), below 4 GiB for
  // a 960-image MLP run.
  INFO("peak RSS " << r.peak_rss_bytes / 1048576.0 << " MB");
  REQUIRE(r.peak_rss_bytes >= r.epochs.back().allocator_peak_bytes);
  REQUIRE(r.peak_rss_bytes < 4.0 * (1ull << 30));
  // CPU time / (wall x 1 thread): a working single-threaded run is busy most of its wall time
  // (shared machines steal some), and cannot exceed one thread's worth by much.
  INFO("cpu utilisation " << r.cpu_utilisation);
  REQUIRE(r.cpu_utilisation > 0.05);
  REQUIRE(r.cpu_utilisation <= 1.5);
  // The allocator's peak is exact (not sampled): from epoch 2 on (Adam's moments exist), every
  // epoch allocates the same, so any growth would be a leak.
  for (std::size_t e = 2; e < r.epochs.size(); ++e)
    REQUIRE(r.epochs[e].allocator_peak_bytes == r.epochs[1].allocator_peak_bytes);
  REQUIRE_THAT(log.str(), Catch::Contains("epoch 4/4: loss"));
}

TEST_CASE("anvil train: bad configurations fail with clear errors", "[train][errors]") {
  std::ostringstream log;
  auto c = small_run("mlp_mnist");
  c.optimizer = "rmsprop";
  REQUIRE_THROWS_WITH(tools::run_training(c, log),
                      Catch::Contains("--optimizer must be sgd, adam or adamw"));
  c = small_run("ptb_small");
  c.target_accuracy = 0.5;
  REQUIRE_THROWS_WITH(tools::run_training(c, log), Catch::Contains("is not a language model") ||
                                                       Catch::Contains("takes token ids"));
  c = small_run("mlp_mnist");
  c.val_split = 1.0;
  REQUIRE_THROWS_WITH(tools::run_training(c, log),
                      Catch::Contains("--val-split must be in [0, 1)"));
  c = small_run("mlp_mnist");
  c.resume = temp_path("missing.safetensors");
  REQUIRE_THROWS_WITH(tools::run_training(c, log), Catch::Contains("missing.safetensors"));
  c = small_run("mlp_mnist");
  c.optimizer = "adamw";
  c.weight_decay = 1.5;
  REQUIRE_THROWS_AS(tools::run_training(c, log), ConfigError);
  REQUIRE_THROWS_WITH(tools::run_training(c, log),
                      Catch::Contains("--weight-decay must be in [0, 1], got 1.5"));
  c = small_run("mlp_mnist");
  c.lr_schedule = "exponential";
  REQUIRE_THROWS_WITH(tools::run_training(c, log),
                      Catch::Contains("--lr-schedule must be none, step, multistep or cosine, "
                                      "got 'exponential'"));
  c = small_run("mlp_mnist");
  c.warmup_steps = -1;
  REQUIRE_THROWS_AS(tools::run_training(c, log), ConfigError);
  c = small_run("mlp_mnist");
  c.device = "tpu";
  REQUIRE_THROWS_WITH(tools::run_training(c, log),
                      Catch::Contains("--device must be cpu or cuda, got 'tpu'"));
}

TEST_CASE("anvil train --precision bf16 trains to about fp32's accuracy with f32 weights",
          "[train][real_data][autocast]") {
  std::ostringstream log;
  const std::string ckpt = temp_path("bf16.safetensors");
  auto fp32 = small_run("mlp_mnist");
  fp32.epochs = 2;
  auto bf16 = fp32;
  bf16.precision = "bf16";
  bf16.checkpoint = ckpt;
  const auto r32 = tools::run_training(fp32, log);
  const auto r16 = tools::run_training(bf16, log);
  std::printf("anvil train (mlp_mnist, 960 images, 2 epochs): test accuracy fp32 %.4f, bf16 %.4f\n",
              r32.test_metric, r16.test_metric);
  // bf16 keeps 8 significant bits: the run differs from fp32's (it did run in bf16), but on
  // 1200 test images the accuracy stays within 3 points (36 images) of fp32's.
  REQUIRE(r16.epochs.front().train_loss != r32.epochs.front().train_loss);
  REQUIRE(std::abs(r16.test_metric - r32.test_metric) < 0.03);
  // The master weights are checkpointed in f32, and the run's precision is recorded.
  const SafetensorsFile file = load_safetensors(ckpt);
  std::filesystem::remove(ckpt);
  REQUIRE(file.metadata.at("anvil_train.precision") == "bf16");
  REQUIRE(!file.tensors.empty());
  for (const auto& [name, t] : file.tensors) {
    INFO(name);
    if (t.dtype() != DType::i64) REQUIRE(t.dtype() == DType::f32);  // i64: generator state
  }
}

TEST_CASE("anvil train --precision bf16 trains cnn_mnist to about fp32's loss and accuracy",
          "[train][real_data][autocast][conv]") {
  // The convolutions and the pools run in bf16 too (Note [Autocast policy]).
  std::ostringstream log;
  auto fp32 = small_run("cnn_mnist");
  fp32.epochs = 1;
  auto bf16 = fp32;
  bf16.precision = "bf16";
  const auto r32 = tools::run_training(fp32, log);
  const auto r16 = tools::run_training(bf16, log);
  const double l32 = r32.epochs.front().train_loss, l16 = r16.epochs.front().train_loss;
  std::printf(
      "anvil train (cnn_mnist, 960 images, 1 epoch): train loss fp32 %.4f, bf16 %.4f; "
      "test accuracy fp32 %.4f, bf16 %.4f\n",
      l32, l16, r32.test_metric, r16.test_metric);
  REQUIRE(l16 != l32);  // it ran in bf16
  // One epoch from the same weights and batches: the mean training loss within 5 % of fp32's,
  // the accuracy on 1200 test images within 3 points.
  REQUIRE(std::abs(l16 - l32) < 0.05 * l32);
  REQUIRE(std::abs(r16.test_metric - r32.test_metric) < 0.03);
}

TEST_CASE("anvil train --precision fp16 trains to about fp32's loss with loss scaling",
          "[train][real_data][autocast][grad_scaler]") {
  std::ostringstream log;
  const std::string ckpt = temp_path("fp16.safetensors");
  const std::string json_path = temp_path("fp16.json");
  auto fp32 = small_run("mlp_mnist");
  fp32.epochs = 2;
  auto fp16 = fp32;
  fp16.precision = "fp16";
  fp16.checkpoint = ckpt;
  fp16.json_log = json_path;
  const auto r32 = tools::run_training(fp32, log);
  const auto r16 = tools::run_training(fp16, log);
  std::printf(
      "anvil train (mlp_mnist, 960 images, 2 epochs): fp32 loss %.5f test accuracy %.4f; fp16 "
      "loss %.5f test accuracy %.4f, loss scale %g, %lld step(s) skipped\n",
      r32.epochs.back().train_loss, r32.test_metric, r16.epochs.back().train_loss, r16.test_metric,
      r16.epochs.back().loss_scale, static_cast<long long>(r16.skipped_steps));
  // It ran in f16 (the loss differs from fp32's) with a scale, and reports it.
  REQUIRE(r16.epochs.front().train_loss != r32.epochs.front().train_loss);
  REQUIRE(r16.epochs.back().loss_scale > 0);
  REQUIRE(r32.epochs.back().loss_scale == 0);
  REQUIRE(log.str().find("loss scale") != std::string::npos);
  // f16 keeps 11 significant bits (bf16: 8) and the GEMMs accumulate in f32, so each operand
  // moves by at most 2^-11 relative; over 30 Adam steps these differences grow but stay small:
  // the mean training loss of the second epoch within 1 % of fp32's (measured 0.14 %, 0.73636
  // against 0.73741) and the test accuracy on 1200 images within 2 points (measured equal).
  REQUIRE(std::abs(r16.epochs.back().train_loss - r32.epochs.back().train_loss) <
          0.01 * r32.epochs.back().train_loss);
  REQUIRE(std::abs(r16.test_metric - r32.test_metric) < 0.02);
  // The checkpoint holds the scaler's state; the JSON log the scale and the skipped steps.
  const auto info = optim::read_checkpoint_info(ckpt);
  REQUIRE(std::stod(info.metadata.at("anvil.grad_scaler.scale")) == r16.epochs.back().loss_scale);
  std::ifstream f(json_path);
  const auto doc = nlohmann::json::parse(f);
  REQUIRE(doc["epochs"][1]["loss_scale"].get<double>() == r16.epochs.back().loss_scale);
  REQUIRE(doc["result"]["skipped_steps"].get<std::int64_t>() == r16.skipped_steps);
  std::filesystem::remove(ckpt);
  std::filesystem::remove(json_path);
}

TEST_CASE("anvil train --precision fp16: resuming repeats the uninterrupted run exactly",
          "[train][real_data][autocast][grad_scaler]") {
  std::ostringstream log;
  const std::string ckpt = temp_path("fp16_resume.safetensors");
  auto straight = small_run("mlp_mnist");
  straight.precision = "fp16";
  straight.epochs = 2;
  const auto full = tools::run_training(straight, log);
  auto first = straight;
  first.epochs = 1;
  first.checkpoint = ckpt;
  tools::run_training(first, log);
  auto rest = straight;
  rest.resume = ckpt;
  const auto resumed = tools::run_training(rest, log);
  std::filesystem::remove(ckpt);
  REQUIRE(resumed.first_epoch == 2);
  REQUIRE(resumed.epochs.back().train_loss == full.epochs.back().train_loss);
  REQUIRE(resumed.epochs.back().loss_scale == full.epochs.back().loss_scale);
  REQUIRE(resumed.skipped_steps == full.skipped_steps);
  REQUIRE(resumed.test_loss == full.test_loss);
}

TEST_CASE("anvil train --precision refuses what it cannot run yet", "[train][errors][autocast]") {
  std::ostringstream log;
  auto c = small_run("mlp_mnist");
  c.precision = "fp8";
  REQUIRE_THROWS_AS(tools::run_training(c, log), ConfigError);
  REQUIRE_THROWS_WITH(tools::run_training(c, log), Catch::Contains("unknown precision 'fp8'"));
  c.precision = "fp16";
  c.shard_optimizer = true;
  REQUIRE_THROWS_WITH(tools::run_training(c, log),
                      Catch::Contains("--precision fp16 with --shard-optimizer is not supported"));
  c.shard_optimizer = false;
  c.device = "cuda";  // refused before looking for a GPU, so the same on every machine
  REQUIRE_THROWS_WITH(tools::run_training(c, log),
                      Catch::Contains("--precision fp16 on --device cuda is not supported yet"));
  c.device = "cpu";
  c.precision = "tf32";
  REQUIRE_THROWS_WITH(tools::run_training(c, log), Catch::Contains("GPU tensor-core mode"));
}
