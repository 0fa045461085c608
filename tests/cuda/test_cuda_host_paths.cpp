// SPDX-License-Identifier: Apache-2.0
// The host side of GPU runs: code that must never read a CUDA tensor's memory through a host
// pointer. Ops with CPU kernels only refuse CUDA tensors by name (after the device allocations
// that tests/test_device_refusals.cpp cannot make without a GPU); linear_cross_entropy composes
// device ops; checkpoints save and load CUDA parameters and optimizer state; printing, item()
// and the tests' value helpers copy to the host first. Runs only with a GPU (gpu_main.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "anvil/anvil.h"
#include "helpers/gradcheck.h"
#include "models/training_step.h"

using namespace anvil;
using Catch::Contains;

namespace {

const Device kGpu = Device::cuda(0);

void setup() {
  require_cuda("test_cuda_host_paths");
  register_builtin_kernels();
}

std::vector<double> host(const Tensor& t) { return test::values_f64(t.detach().to(Device::cpu())); }

}  // namespace

TEST_CASE("mixed devices and host reads of CUDA tensors are refused by name", "[cuda][errors]") {
  setup();
  Generator gen(1);
  const Tensor x = normal({2, 3, 6, 6}, 0, 1, DType::f32, &gen).to(kGpu);
  const Tensor w = normal({4, 3, 3, 3}, 0, 1, DType::f32, &gen).to(kGpu);
  const Tensor b = Tensor::zeros({4}, DType::f32, kGpu);
  // conv2d, pooling, batch norm and the LSTM have CUDA variants (test_cuda_conv*.cpp,
  // test_cuda_pool_bn.cpp, test_cuda_lstm.cpp); a weight left on the host is refused by name.
  CHECK_THROWS_WITH(conv2d(x, w.to(Device::cpu()), b), Contains("conv2d") && Contains("cuda:0"));
  CHECK_THROWS_WITH(conv2d_relu(x, w.to(Device::cpu()), b),
                    Contains("conv2d") && Contains("cuda:0"));
  const Tensor table = normal({10, 4}, 0, 1, DType::f32, &gen).to(kGpu);
  const Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{1, 9}, {2});
  // Embedding runs on the GPU now (cuda.custom.embedding); mixed devices are refused by name.
  CHECK_THROWS_WITH(embedding(table, ids), Contains("embedding") && Contains("cuda:0"));
  const Tensor seq = normal({3, 2, 5}, 0, 1, DType::f32, &gen).to(kGpu);
  const Tensor w_ih = normal({16, 5}, 0, 1, DType::f32, &gen).to(kGpu);
  const Tensor w_hh = normal({16, 4}, 0, 1, DType::f32, &gen).to(kGpu);
  const Tensor b_ih = Tensor::zeros({16}, DType::f32, kGpu);
  CHECK_THROWS_WITH(
      lstm_layer(seq, Tensor(), Tensor(), w_ih, w_hh.to(Device::cpu()), b_ih, Tensor()),
      Contains("lstm") && Contains("cuda:0"));
  CHECK_THROWS_WITH(x.data<float>(), Contains("Tensor::data") && Contains("cuda:0"));
}

TEST_CASE("linear_cross_entropy on CUDA is linear then cross_entropy, as on the CPU",
          "[cuda][loss]") {
  setup();
  Generator gen(2);
  const Tensor x0 = normal({6, 8}, 0, 1, DType::f64, &gen),
               w0 = normal({5, 8}, 0, 0.3, DType::f64, &gen);
  const Tensor b0 = normal({5}, 0, 0.1, DType::f64, &gen);
  const Tensor t = Tensor::from_vector(std::vector<std::int64_t>{0, 4, 2, 2, 1, 3}, {6});
  auto run = [&](Device dev) {
    Tensor x = x0.to(dev).clone(), w = w0.to(dev).clone(), b = b0.to(dev).clone();
    for (Tensor* p : {&x, &w, &b}) p->set_requires_grad(true);
    Tensor loss = linear_cross_entropy(x, w, b, t.to(dev));
    loss.backward();
    return std::vector<std::vector<double>>{host(loss), host(x.grad()), host(w.grad()),
                                            host(b.grad())};
  };
  const auto cpu = run(Device::cpu()), gpu = run(kGpu);
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    INFO("output " << i);
    REQUIRE(cpu[i].size() == gpu[i].size());
    for (std::size_t j = 0; j < cpu[i].size(); ++j)
      CHECK(gpu[i][j] == Approx(cpu[i][j]).epsilon(1e-12).margin(1e-14));
  }
}

TEST_CASE("a checkpoint of CUDA parameters and Adam state loads back onto the GPU",
          "[cuda][checkpoint]") {
  setup();
  const auto& info = models::info("mlp_mnist");
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("anvil_test_cuda_ckpt_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  Generator data_gen(4);
  models::Batch batch = models::synthetic_batch(info, 16, data_gen);
  batch.input = batch.input.to(kGpu);
  batch.target = batch.target.to(kGpu);
  auto make = [&] {
    nn::ModulePtr net = models::create("mlp_mnist", {.seed = 9});
    net->to(kGpu);
    return net;
  };
  auto step = [&](nn::Module& net, optim::Optimizer& opt) {
    opt.zero_grad();
    Tensor loss = models::model_forward_loss(info, net, batch.input, batch.target);
    loss.backward();
    opt.step();
    return loss.item();
  };
  manual_seed(21);
  nn::ModulePtr a = make();
  optim::Adam opt_a(a->parameters(), {});
  a->train(true);
  step(*a, opt_a);
  step(*a, opt_a);
  optim::save_checkpoint(path, *a, &opt_a, {});

  nn::ModulePtr b = make();  // fresh weights on the GPU, no optimizer state yet
  optim::Adam opt_b(b->parameters(), {});
  optim::load_checkpoint(path, *b, &opt_b);
  std::remove(path.c_str());
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) {
    INFO(pa[i].first);
    CHECK(pb[i].second.device() == kGpu);
    CHECK(host(pb[i].second) == host(pa[i].second));
  }
  const auto sa = opt_a.state(), sb = opt_b.state();
  REQUIRE(sa.size() == sb.size());
  for (std::size_t i = 0; i < sa.size(); ++i) {
    INFO(sa[i].first);
    CHECK(sb[i].second.device() == kGpu);
    CHECK(host(sb[i].second) == host(sa[i].second));
  }
  // The Dropout layers' generators and Adam's step count were restored too: one more step of
  // each gives the same loss and parameters (the same kernels on the same inputs).
  b->train(true);
  const double la = step(*a, opt_a), lb = step(*b, opt_b);
  CHECK(lb == Approx(la).epsilon(1e-6));
  for (std::size_t i = 0; i < pa.size(); ++i) {
    INFO(pa[i].first);
    const auto va = host(pa[i].second), vb = host(pb[i].second);
    double diff = 0;
    for (std::size_t j = 0; j < va.size(); ++j) diff = std::max(diff, std::abs(va[j] - vb[j]));
    CHECK(diff <= 1e-6);
  }
}

TEST_CASE("printing, item() and the value helpers read CUDA tensors through the host",
          "[cuda][copy]") {
  setup();
  const Tensor c = Tensor::arange(12, DType::f64).reshape({3, 4});
  const Tensor g = c.to(kGpu);
  std::string text = g.str();
  const auto at = text.find("cuda:0");
  REQUIRE(at != std::string::npos);
  text.replace(at, 6, "cpu");
  CHECK(text == c.str());
  CHECK(g.t().select(0, 1).select(0, 2).item() == 9.0);  // a strided element at an offset
  CHECK(test::values_f64(g.t()) == test::values_f64(c.t()));
  CHECK(test::max_abs_diff(g, c) == 0.0);
}
