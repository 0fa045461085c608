// SPDX-License-Identifier: Apache-2.0
// The CNN models of models/ (cnn_mnist, cnn_cifar, alexnet, resnet50, vgg16) train a few steps on
// the GPU as on the CPU: same seed, same synthetic batch, plain FP32 (cuda.cublas GEMMs, cuDNN in
// CUDNN_FMA_MATH); every step's loss within a relative 1e-3 (cuDNN's algorithms sum in other
// orders than the CPU kernels), and so are the batch-norm running statistics (ResNet-50) and
// the parameters after the steps. A model without a GPU path yet (ModelInfo::gpu_path, kCnnGpuPath
// in models/cnn.cpp: pooling and batch norm need CUDA variants first) must be refused by name, and
// the test says so with a warning. Runs only with a GPU (gpu_main.cpp reports it skipped
// otherwise).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/cuda_backend.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/selection.h"
#include "helpers/gradcheck.h"
#include "kernels/register.h"
#include "models/training_step.h"

using namespace anvil;
using Catch::Matchers::Contains;

namespace {
const Device kGpu = Device::cuda(0);

struct CnnRun {
  std::vector<double> losses;
  std::vector<Tensor> params, buffers;  // on the host
};

CnnRun run(const std::string& model, std::int64_t batch, Device device, int steps) {
  models::TrainingStep s(model, batch, /*seed=*/3, /*fold_sgd=*/false, device);
  std::unique_ptr<ForceVariant> force;
  if (device.is_cuda()) force = std::make_unique<ForceVariant>("gemm", "cuda.cublas");
  std::unique_ptr<ForceVariant> drop;  // the same dropout masks on both devices
  if (device.is_cpu()) drop = std::make_unique<ForceVariant>("dropout", "ref");
  CnnRun r;
  for (int i = 0; i < steps; ++i) {
    s.train_step();
    r.losses.push_back(s.last_loss());
  }
  for (const auto& p : s.net().parameters()) r.params.push_back(p.detach().to(Device::cpu()));
  for (const auto& [name, b] : s.net().named_buffers())
    r.buffers.push_back(b.detach().to(Device::cpu()));
  return r;
}

// max |a - b| / (1 + max |b|): relative to the tensor's scale.
double rel_diff(const Tensor& a, const Tensor& b) {
  double scale = 0;
  for (double v : test::values_f64(b)) scale = std::max(scale, std::fabs(v));
  return test::max_abs_diff(a, b) / (1.0 + scale);
}
}  // namespace

TEST_CASE("the CNN models train on the GPU as on the CPU", "[cuda][conv][training]") {
  require_cuda("test_cuda_cnn_models");
  register_builtin_kernels();
  struct Model {
    const char* name;
    std::int64_t batch;
  };
  for (const Model& m : {Model{"cnn_mnist", 8}, Model{"cnn_cifar", 8}, Model{"alexnet", 2},
                         Model{"resnet50", 2}, Model{"vgg16", 2}}) {
    INFO(m.name);
    if (!models::info(m.name).gpu_path) {
      CHECK_THROWS_WITH(models::TrainingStep(m.name, m.batch, 3, false, kGpu), Contains(m.name));
      WARN(std::string(m.name) + " has no GPU path yet (ModelInfo::gpu_path); not compared");
      continue;
    }
    const CnnRun cpu = run(m.name, m.batch, Device::cpu(), 3);
    const CnnRun gpu = run(m.name, m.batch, kGpu, 3);
    REQUIRE(cpu.losses.size() == gpu.losses.size());
    for (std::size_t i = 0; i < cpu.losses.size(); ++i) {
      INFO("step " << i);
      CHECK(gpu.losses[i] == Approx(cpu.losses[i]).epsilon(1e-3));
    }
    REQUIRE(cpu.buffers.size() == gpu.buffers.size());
    for (std::size_t i = 0; i < cpu.buffers.size(); ++i) {
      INFO("buffer " << i);
      CHECK(rel_diff(gpu.buffers[i], cpu.buffers[i]) <= 1e-3);
    }
    REQUIRE(cpu.params.size() == gpu.params.size());
    for (std::size_t i = 0; i < cpu.params.size(); ++i) {
      INFO("parameter " << i);
      CHECK(rel_diff(gpu.params[i], cpu.params[i]) <= 1e-3);
    }
  }
}
