// SPDX-License-Identifier: Apache-2.0
// `anvil train --device cuda` (tools/anvil/trainer.h) against the same run on the CPU, on a small
// synthetic dataset in MNIST's IDX format written here (the GPU machine need not have the Debian
// Fashion-MNIST package): the same seed gives the same initial weights and data order on both
// devices, and dropout draws the same Philox masks when the CPU is forced to the `ref` variant,
// so the epochs' losses and the test accuracy must agree. Runs only with a GPU (gpu_main.cpp).
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "anvil/anvil.h"
#include "engine/dispatch/gemm_problem.h"
#include "kernels/register.h"
#include "tools/anvil/trainer.h"

using namespace anvil;
namespace fs = std::filesystem;

namespace {

void write_idx(const fs::path& path, const std::vector<std::uint32_t>& dims,
               const std::vector<std::uint8_t>& data) {
  std::ofstream f(path, std::ios::binary);
  const unsigned char magic[4] = {0, 0, 0x08,
                                  static_cast<unsigned char>(dims.size())};  // unsigned bytes
  f.write(reinterpret_cast<const char*>(magic), 4);
  for (std::uint32_t d : dims) {
    const unsigned char be[4] = {static_cast<unsigned char>(d >> 24),
                                 static_cast<unsigned char>(d >> 16),
                                 static_cast<unsigned char>(d >> 8), static_cast<unsigned char>(d)};
    f.write(reinterpret_cast<const char*>(be), 4);
  }
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  REQUIRE(f.good());
}

// n 28x28 images of 10 classes: class k lights rows 2k .. 2k+4 over noise, so a classifier can
// learn it in an epoch or two. Deterministic (a fixed linear congruential stream).
void write_split(const fs::path& dir, const std::string& prefix, std::uint32_t n,
                 std::uint32_t seed) {
  std::vector<std::uint8_t> images(static_cast<std::size_t>(n) * 784), labels(n);
  std::uint32_t state = seed;
  auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 24; };  // 0..255
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint32_t k = i % 10;
    labels[i] = static_cast<std::uint8_t>(k);
    for (std::uint32_t p = 0; p < 784; ++p) {
      const std::uint32_t row = p / 28;
      const bool lit = row >= 2 * k && row < 2 * k + 5;
      images[static_cast<std::size_t>(i) * 784 + p] =
          static_cast<std::uint8_t>(lit ? 128 + next() / 2 : next() / 3);
    }
  }
  write_idx(dir / (prefix + "-images-idx3-ubyte"), {n, 28, 28}, images);
  write_idx(dir / (prefix + "-labels-idx1-ubyte"), {n}, labels);
}

struct TempDataset {
  fs::path dir =
      fs::temp_directory_path() / ("anvil_test_cuda_train_" + std::to_string(::getpid()));
  TempDataset() {
    fs::create_directories(dir);
    write_split(dir, "train", 640, 11);
    write_split(dir, "t10k", 200, 12);
  }
  ~TempDataset() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

tools::TrainConfig config(const std::string& dir, const std::string& device) {
  tools::TrainConfig c;
  c.model = "mlp_mnist";  // Linear, ReLU, dropout 0.2, softmax cross-entropy
  c.dataset = dir;
  c.epochs = 2;
  c.batch = 32;
  c.optimizer = "sgd";  // plain SGD keeps CPU and GPU rounding differences small over 40 steps
  c.lr = 0.05;
  c.threads = 1;
  c.seed = 7;
  c.device = device;
  return c;
}

}  // namespace

TEST_CASE("anvil train on cuda matches the same run on the CPU", "[cuda][training][train]") {
  require_cuda("test_cuda_train_tool");
  register_builtin_kernels();
  TempDataset data;
  std::ostringstream log;

  tools::TrainReport cpu, gpu;
  {
    ForceVariant drop("dropout", "ref");  // the Philox masks of cuda.custom.dropout
    cpu = tools::run_training(config(data.dir.string(), "cpu"), log);
  }
  {
    std::unique_ptr<ForceVariant> fp32;  // plain FP32 GEMMs, whatever a heuristic would pick
    if (gemm_table().find("cuda.cublas") != nullptr)
      fp32 = std::make_unique<ForceVariant>("gemm", "cuda.cublas");
    gpu = tools::run_training(config(data.dir.string(), "cuda"), log);
  }
  INFO(log.str());
  CHECK(cpu.device == "cpu");
  CHECK(gpu.device.rfind("cuda:0 ", 0) == 0);
  REQUIRE(cpu.epochs.size() == 2);
  REQUIRE(gpu.epochs.size() == 2);
  for (std::size_t e = 0; e < 2; ++e) {
    INFO("epoch " << e + 1);
    CHECK(gpu.epochs[e].train_loss == Approx(cpu.epochs[e].train_loss).epsilon(1e-3));
    CHECK(gpu.epochs[e].val_loss == Approx(cpu.epochs[e].val_loss).epsilon(1e-3));
    CHECK(gpu.epochs[e].gpu_allocator_peak_bytes > 0);
    CHECK(cpu.epochs[e].gpu_allocator_peak_bytes == 0);
  }
  CHECK(gpu.epochs[1].train_loss < gpu.epochs[0].train_loss);
  CHECK(gpu.test_loss == Approx(cpu.test_loss).epsilon(1e-3));
  CHECK(gpu.test_metric == Approx(cpu.test_metric).margin(0.02));  // a sample or four may flip
  CHECK(gpu.test_metric > 0.9);
  CHECK(gpu.test_samples == 200);
}

TEST_CASE("anvil train on cuda resumes from a checkpoint as the uninterrupted run",
          "[cuda][training][train]") {
  // Checkpoints of a GPU run: CUDA parameters and Adam's CUDA state saved through the host,
  // loaded back onto the device; the evaluation reads the GPU logits back for the accuracy.
  require_cuda("test_cuda_train_tool");
  register_builtin_kernels();
  TempDataset data;
  std::ostringstream log;
  const std::string ckpt = (data.dir / "resume.safetensors").string();
  std::unique_ptr<ForceVariant> fp32;
  if (gemm_table().find("cuda.cublas") != nullptr)
    fp32 = std::make_unique<ForceVariant>("gemm", "cuda.cublas");
  auto run = [&](int epochs, const std::string& checkpoint, const std::string& resume) {
    tools::TrainConfig c = config(data.dir.string(), "cuda");
    c.optimizer = "adam";
    c.lr = 1e-3;
    c.epochs = epochs;
    c.checkpoint = checkpoint;
    c.resume = resume;
    return tools::run_training(c, log);
  };
  const tools::TrainReport full = run(2, "", "");
  run(1, ckpt, "");
  const tools::TrainReport resumed = run(2, "", ckpt);
  INFO(log.str());
  REQUIRE(resumed.first_epoch == 2);
  REQUIRE(resumed.epochs.size() == 1);
  REQUIRE(full.epochs.size() == 2);
  // The same kernels on the same data and state: equal but for run-to-run rounding noise (none
  // expected: one stream, no atomics), which could flip at most a sample of the accuracies.
  CHECK(resumed.epochs[0].train_loss == Approx(full.epochs[1].train_loss).epsilon(1e-6));
  CHECK(resumed.epochs[0].val_loss == Approx(full.epochs[1].val_loss).epsilon(1e-6));
  CHECK(resumed.epochs[0].val_metric == Approx(full.epochs[1].val_metric).margin(0.01));
  CHECK(resumed.test_loss == Approx(full.test_loss).epsilon(1e-6));
  CHECK(resumed.test_metric == Approx(full.test_metric).margin(0.01));
}
