// SPDX-License-Identifier: Apache-2.0
// load_checkpoint is all or nothing (Note [Transactional checkpoint load] in
// engine/optim/checkpoint.cpp): each part of a valid checkpoint is corrupted in turn (model
// tensors, buffers, optimizer tensors and options, the default generator's text, a Dropout
// layer's own generator, the format version, the header, the length) and after the error the
// model's parameters and buffers, the optimizer's state and options, the default generator and
// the Dropout generator must be bitwise what they were.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "anvil/anvil.h"
#include "engine/core/views.h"
#include "helpers/bytes.h"
#include "helpers/checkpoint_nets.h"
#include "helpers/datasets.h"

using namespace anvil;
namespace fs = std::filesystem;

namespace {

// A conv net with buffers (BatchNorm running statistics) and a Dropout layer with its own
// generator (module extra state), initialised from `seed`.
nn::ModulePtr make_net(std::uint64_t seed) { return test::checkpoint_conv_net(seed, true); }

void train(nn::Module& net, optim::Optimizer& opt, std::uint64_t seed, int steps) {
  Generator g(seed);
  const Tensor x = normal({4, 1, 6, 6}, 0.0, 1.0, DType::f32, &g);
  const Tensor y = randint({4}, 0, 3, DType::i64, &g);
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    Tensor loss = cross_entropy(net.forward(x), y);
    loss.backward();
    opt.step();
  }
}

// Everything load_checkpoint may change, as text and bytes.
std::map<std::string, std::string> everything(const nn::Module& net, const optim::Optimizer& opt) {
  std::map<std::string, std::string> out;
  for (const auto& [n, t] : net.named_parameters()) out["param." + n] = test::tensor_bytes(t);
  for (const auto& [n, t] : net.named_buffers()) out["buffer." + n] = test::tensor_bytes(t);
  for (const auto& [n, t] : opt.state()) out["optim." + n] = test::tensor_bytes(t);
  for (const auto& [k, v] : opt.state_metadata()) out["optim_meta." + k] = v;
  for (const auto& [k, v] : net.named_extra_state()) out["extra." + k] = v;
  out["default_generator"] = default_generator().state();
  return out;
}

// One corruption: edits the parsed file (tensors, metadata) or, when `raw` is set, the bytes.
struct Corruption {
  std::string what;
  std::string message;  // a part of the expected error
  std::function<void(SafetensorsFile&)> edit;
  std::function<std::string(const std::string&)> raw;
};

void erase_tensor(SafetensorsFile& f, const std::string& name) {
  auto& ts = f.tensors;
  const auto it =
      std::find_if(ts.begin(), ts.end(), [&](const auto& p) { return p.first == name; });
  REQUIRE(it != ts.end());
  ts.erase(it);
}

Tensor& tensor(SafetensorsFile& f, const std::string& name) {
  for (auto& [n, t] : f.tensors)
    if (n == name) return t;
  FAIL("no tensor " << name);
  throw;
}

}  // namespace

TEST_CASE("a corrupt checkpoint changes neither model, optimizer nor generators",
          "[checkpoint][transactional]") {
  test::ScratchDir dir("ckpt_tx");
  const std::string good = dir.file("good.safetensors");
  {
    auto src = make_net(1);
    optim::Adam adam(src->parameters(), {.lr = 1e-2});
    manual_seed(11);
    train(*src, adam, 5, 2);
    optim::save_checkpoint(good, *src, &adam, {{"epoch", "1"}});
  }
  const SafetensorsFile parsed = load_safetensors(good);
  std::string dropout_key;
  for (const auto& [k, v] : parsed.metadata)
    if (k.rfind("anvil.module.", 0) == 0) dropout_key = k;
  REQUIRE(dropout_key == "anvil.module.3.generator");

  const std::vector<Corruption> corruptions = {
      {"a parameter of another shape", "is [3,31] f32 in the checkpoint but",
       [](SafetensorsFile& f) {
         tensor(f, "model.5.weight") = Tensor::zeros({3, 31});
       }},
      {"a parameter of another dtype", "f64 in the checkpoint",
       [](SafetensorsFile& f) { tensor(f, "model.0.bias") = Tensor::zeros({2}, DType::f64); }},
      {"a missing parameter", "is missing from the checkpoint",
       [](SafetensorsFile& f) { erase_tensor(f, "model.5.bias"); }},
      {"a missing buffer", "is missing from the checkpoint",
       [](SafetensorsFile& f) { erase_tensor(f, "model.1.running_var"); }},
      {"a buffer of another shape", "model.1.running_mean",
       [](SafetensorsFile& f) { tensor(f, "model.1.running_mean") = Tensor::zeros({3}); }},
      {"a tensor the model does not have", "is not in the model",
       [](SafetensorsFile& f) { f.tensors.emplace_back("model.9.weight", Tensor::zeros({2})); }},
      {"a tensor of neither part", "neither model.* nor optim.*",
       [](SafetensorsFile& f) { f.tensors.emplace_back("stray", Tensor::zeros({2})); }},
      {"an optimizer tensor of another shape", "adam.m.0",
       [](SafetensorsFile& f) { tensor(f, "optim.adam.m.0") = Tensor::zeros({5}); }},
      {"Adam m without v", "adam.m but no adam.v",
       [](SafetensorsFile& f) { erase_tensor(f, "optim.adam.v.2"); }},
      {"an optimizer tensor for a parameter that does not exist", "adam.m.9",
       [](SafetensorsFile& f) { f.tensors.emplace_back("optim.adam.m.9", Tensor::zeros({2})); }},
      {"an optimizer option that is not a number", "lr",
       [](SafetensorsFile& f) { f.metadata["optim.lr"] = "fast"; }},
      {"a negative step count", "step",
       [](SafetensorsFile& f) { f.metadata["optim.step"] = "-4"; }},
      {"a missing optimizer option", "beta2",
       [](SafetensorsFile& f) { f.metadata.erase("optim.beta2"); }},
      {"another optimizer type", "saved by SGD",
       [](SafetensorsFile& f) { f.metadata["optim.type"] = "SGD"; }},
      // std::string("7"), std::string("2"): assigning a one-character literal trips GCC 12's
      // -Wrestrict false positive at -O3.
      {"another parameter count", "parameters",
       [](SafetensorsFile& f) { f.metadata["optim.num_params"] = std::string("7"); }},
      {"a corrupt default generator", "anvil.rng.default",
       [](SafetensorsFile& f) { f.metadata["anvil.rng.default"] = "12 34 not a state"; }},
      {"a missing default generator", "anvil.rng.default",
       [](SafetensorsFile& f) { f.metadata.erase("anvil.rng.default"); }},
      {"a corrupt Dropout generator", "3.generator",
       [&](SafetensorsFile& f) { f.metadata[dropout_key] = f.metadata[dropout_key] + " 7 junk"; }},
      {"a truncated Dropout generator", "3.generator",
       [&](SafetensorsFile& f) { f.metadata[dropout_key].resize(100); }},
      {"a missing Dropout generator", "3.generator",
       [&](SafetensorsFile& f) { f.metadata.erase(dropout_key); }},
      {"a newer format version", "format version 2",
       [](SafetensorsFile& f) { f.metadata["anvil.format_version"] = std::string("2"); }},
      {"a truncated file", "lie outside the data section", nullptr,
       [](const std::string& b) { return b.substr(0, b.size() - 100); }},
      {"a header that is not JSON", "invalid JSON header", nullptr,
       [](const std::string& b) {
         std::string c = b;
         c[20] = '\x01';
         return c;
       }},
      {"a header length past the end", "larger than the rest of the file", nullptr,
       [](const std::string& b) {
         std::string c = b;
         c[5] = '\x7f';
         return c;
       }},
  };

  const std::string good_bytes = test::read_file(good);
  for (const Corruption& c : corruptions) {
    INFO("corruption: " << c.what);
    const std::string bad = dir.file("bad.safetensors");
    if (c.raw) {
      test::overwrite_file(bad, c.raw(good_bytes));
    } else {
      SafetensorsFile f = load_safetensors(good);
      c.edit(f);
      save_safetensors(bad, f.tensors, f.metadata);
    }
    // The victim: another init, trained elsewhere, another default generator state.
    auto net = make_net(2);
    optim::Adam adam(net->parameters(), {.lr = 3e-3, .beta2 = 0.99});
    manual_seed(99);
    train(*net, adam, 6, 1);
    const auto before = everything(*net, adam);
    CHECK_THROWS_WITH(optim::load_checkpoint(bad, *net, &adam),
                      Catch::Contains(bad) && Catch::Contains(c.message));
    const auto after = everything(*net, adam);
    REQUIRE(after.size() == before.size());
    for (const auto& [k, v] : before) {
      INFO("part: " << k);
      CHECK(after.at(k) == v);
    }
  }

  // The check is not vacuous: the good file changes every part that the checks above compare.
  auto net = make_net(2);
  optim::Adam adam(net->parameters(), {.lr = 3e-3, .beta2 = 0.99});
  manual_seed(99);
  train(*net, adam, 6, 1);
  const auto before = everything(*net, adam);
  optim::load_checkpoint(good, *net, &adam);
  const auto after = everything(*net, adam);
  for (const auto& [k, v] : before) {
    INFO("part: " << k);
    // Equal in both runs by construction.
    static const std::set<std::string> kSameInBoth = {
        "optim_meta.type",  "optim_meta.num_params", "optim_meta.num_groups",
        "optim_meta.beta1", "optim_meta.eps",        "optim_meta.weight_decay"};
    if (kSameInBoth.count(k)) continue;
    CHECK(after.at(k) != v);
  }
}
