// SPDX-License-Identifier: Apache-2.0
// Host waits of a GPU training step (Note [Host waits in a step], kernels/cuda/host_waits.h),
// counted with the backend's own counters (CudaBackend::sync_counts), and the pinned input
// pipeline (Note [Pinned batches], data/loader.h): one wait per step for fcn5 and mlp_mnist with
// pinned and resident batches, the cross-entropy range check reported at the step's end, device
// clipping equal to the host's, the loss scaler's one wait per step, pinned steps equal to
// pageable ones. Runs only with a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "data/loader.h"
#include "engine/autograd/functions.h"
#include "engine/core/cuda_backend.h"
#include "engine/core/random.h"
#include "engine/ops/softmax.h"
#include "engine/optim/grad_scaler.h"
#include "engine/optim/optimizer.h"
#include "models/training_step.h"

using namespace anvil;
using Catch::Matchers::Contains;

namespace {

const Device kGpu = Device::cuda(0);

CudaBackend::SyncCounts counts() { return require_cuda("test").sync_counts(); }

struct Delta {
  std::uint64_t waits, readbacks;
};
template <typename Fn>
Delta count(Fn&& fn) {
  const auto a = counts();
  fn();
  const auto b = counts();
  return {b.host_waits - a.host_waits, b.readbacks - a.readbacks};
}

}  // namespace

TEST_CASE("a GPU training step waits for the device once", "[cuda][host_waits]") {
  for (const char* model : {"fcn5", "mlp_mnist"}) {
    for (auto source : {models::BatchSource::pinned, models::BatchSource::resident,
                        models::BatchSource::pageable}) {
      for (bool fold : {true, false}) {
        INFO(model << ", batch " << models::batch_source_name(source) << ", folded SGD " << fold);
        models::TrainingStep step(model, 16, /*seed=*/1, fold, kGpu, source);
        step.train_step();  // warm-up: handles, workspaces, the error record, the copy stream
        step.train_step();
        const Delta d = count([&] { step.train_step(); });
        // pageable: the two batch copies wait as well (that is what `pinned` removes).
        const std::uint64_t expected = source == models::BatchSource::pageable ? 3 : 1;
        CHECK(d.waits == expected);
        CHECK(d.readbacks == 0);
        const Delta inf = count([&] { step.inference_step(); });
        CHECK(inf.waits == expected);
        CHECK(inf.readbacks == 0);
      }
    }
  }
}

TEST_CASE("an out-of-range class id on the GPU is reported at the next wait",
          "[cuda][host_waits]") {
  Generator gen(4);
  const Tensor x = uniform({4, 5}, -1.0, 1.0, DType::f32, &gen).to(kGpu);
  const Tensor bad = Tensor::from_vector(std::vector<std::int64_t>{0, 4, 5, -1}, {4}).to(kGpu);
  // Queued without a wait; the error surfaces when the host next waits for the device.
  const Delta d = count([&] { (void)ops::cross_entropy_forward(x, bad); });
  CHECK(d.waits == 0);
  CHECK_THROWS_WITH(
      require_cuda("test").synchronize(0),
      Contains("target 5 at row 2 is out of range for 5 classes") && Contains("cuda:0"));
  // Reported once; the device stays usable.
  CHECK_NOTHROW(require_cuda("test").synchronize(0));
  // A readback is a wait too: item() reports it.
  const Tensor bad32 = Tensor::from_vector(std::vector<std::int32_t>{0, -3, 1, 1}, {4}).to(kGpu);
  Tensor loss = anvil::cross_entropy(x, bad32);
  CHECK_THROWS_WITH(loss.item(), Contains("target -3 at row 1"));
  CHECK(anvil::sum(x).to(Device::cpu()).numel() == 1);
}

TEST_CASE("clip_grad_norm_async_ on the GPU equals clip_grad_norm_ and does not wait",
          "[cuda][host_waits][optim]") {
  for (double max_norm : {0.5, 1e6}) {  // clipping, and a norm already below the bound
    INFO("max_norm " << max_norm);
    Generator gen(7);
    std::vector<Tensor> host, dev;
    for (std::int64_t n : {3, 1000, 70001}) {
      Tensor p = normal({n}, 0, 1, DType::f32, &gen);
      p.set_requires_grad(true);
      p.mutable_grad() = normal({n}, 0, 1, DType::f32, &gen);
      Tensor q = p.detach().to(kGpu);
      q.set_requires_grad(true);
      q.mutable_grad() = p.grad().to(kGpu);
      host.push_back(p);
      dev.push_back(q);
    }
    const double norm = optim::clip_grad_norm_(host, max_norm);
    Tensor norm_dev;
    const Delta d = count([&] { norm_dev = optim::clip_grad_norm_async_(dev, max_norm); });
    CHECK(d.waits == 0);
    CHECK(norm_dev.device() == kGpu);
    CHECK(norm_dev.item() == Approx(norm).epsilon(1e-12));
    for (std::size_t i = 0; i < host.size(); ++i) {
      const Tensor a = host[i].grad(), b = dev[i].grad().to(Device::cpu());
      for (std::int64_t k = 0; k < a.numel(); ++k)
        REQUIRE(b.data<float>()[k] == Approx(a.data<float>()[k]).epsilon(1e-6).margin(1e-9));
    }
  }
}

TEST_CASE("GradScaler on CUDA gradients waits once per step and skips an overflow",
          "[cuda][host_waits][optim][grad_scaler]") {
  // See Note [Dynamic loss scaling]: unscale_ queues the unscale-and-check pass without a wait;
  // step() reads the found_inf flag once (one wait, one readback) and steps or skips.
  Generator gen(9);
  std::vector<Tensor> params;
  for (std::int64_t n : {5, 70001}) {
    Tensor p = normal({n}, 0, 1, DType::f32, &gen).to(kGpu);
    p.set_requires_grad(true);
    params.push_back(p);
  }
  optim::SGD opt(params, 0.5);
  optim::GradScaler scaler({.init_scale = 1024.0});
  for (bool overflow : {false, true}) {
    INFO("overflow " << overflow);
    Tensor g = uniform({70001}, -1024.0, 1024.0, DType::f32, &gen);
    if (overflow) g.data<float>()[69999] = std::numeric_limits<float>::infinity();
    params[0].mutable_grad() = Tensor::full({5}, 2048.0, DType::f32, kGpu);
    params[1].mutable_grad() = g.to(kGpu);
    const Tensor before = params[1].detach().to(Device::cpu());
    const Delta u = count([&] { scaler.unscale_(opt); });
    CHECK(u.waits == 0);
    CHECK(u.readbacks == 0);
    bool stepped = false;
    const Delta s = count([&] { stepped = scaler.step(opt); });
    CHECK(s.waits == 1);
    CHECK(s.readbacks == 1);
    CHECK(stepped == !overflow);
    scaler.update();
    const Tensor after = params[1].detach().to(Device::cpu());
    for (std::int64_t k = 0; k < 70001; ++k) {
      // 1024 is a power of two: the unscaled gradient is exact.
      const float want = overflow ? before.data<float>()[k]
                                  : before.data<float>()[k] - 0.5f * (g.data<float>()[k] / 1024.0f);
      REQUIRE(after.data<float>()[k] == want);
    }
  }
  CHECK(scaler.get_scale() == 512.0);
  CHECK(scaler.skipped_steps() == 1);
}

TEST_CASE("pinned, resident and pageable GPU steps train alike", "[cuda][host_waits][pinned]") {
  std::vector<std::vector<double>> losses;
  for (auto source : {models::BatchSource::pageable, models::BatchSource::pinned,
                      models::BatchSource::resident}) {
    models::TrainingStep step("mlp_mnist", 32, /*seed=*/5, true, kGpu, source);
    std::vector<double> l;
    for (int i = 0; i < 4; ++i) {
      step.train_step();
      l.push_back(step.last_loss());
    }
    losses.push_back(l);
  }
  // Same batch, same weights, same kernels: the same losses, bit for bit.
  CHECK(losses[1] == losses[0]);
  CHECK(losses[2] == losses[0]);
}

TEST_CASE("DataLoader pin_memory batches are page-locked copies of the plain ones",
          "[cuda][pinned][data]") {
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (int i = 0; i < 50; ++i) {
    x.push_back(static_cast<float>(i));
    y.push_back(i);
  }
  const data::TensorDataset ds{Tensor::from_vector(x, {50, 1}), Tensor::from_vector(y, {50})};
  data::DataLoader plain(ds, {.batch = 8, .seed = 3});
  data::DataLoader pinned(ds, {.batch = 8, .seed = 3, .pin_memory = true});
  plain.start_epoch(1);
  pinned.start_epoch(1);
  CudaBackend& be = require_cuda("test");
  const auto before = be.pinned_host_allocator().stats().allocations;
  while (auto a = plain.next()) {
    auto b = pinned.next();
    REQUIRE(b.has_value());
    // Through the asynchronous copy and back.
    Tensor d = Tensor::empty(b->targets.sizes(), DType::i64, kGpu);
    be.copy_to_device_async(0, d.data_ptr(), b->targets.data_ptr(), b->targets.nbytes());
    be.wait_for_copies(0);
    const Tensor back = d.to(Device::cpu());
    for (std::int64_t i = 0; i < a->targets.numel(); ++i)
      REQUIRE(back.data<std::int64_t>()[i] == a->targets.data<std::int64_t>()[i]);
  }
  CHECK(be.pinned_host_allocator().stats().allocations > before);
}
