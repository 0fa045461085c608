// SPDX-License-Identifier: Apache-2.0
#pragma once
// The small conv net of the checkpoint tests (tests/test_checkpoint.cpp,
// tests/test_checkpoint_transactional.cpp): conv 1->2 3x3, BatchNorm (running statistics are
// buffers), ReLU, optionally a Dropout with its own generator (module extra state), flatten,
// linear 32->3; for [N, 1, 6, 6] inputs. Header-only.
#include <array>
#include <cstdint>
#include <memory>

#include "anvil/anvil.h"

namespace anvil::test {

// Initialised from `seed` (the Dropout's generator too).
inline nn::ModulePtr checkpoint_conv_net(std::uint64_t seed, bool dropout) {
  Generator g(seed);
  auto net = std::make_shared<nn::Sequential>();
  net->add(std::make_shared<nn::Conv2d>(1, 2, std::array<std::int64_t, 2>{3, 3}, Conv2dOptions{},
                                        true, &g));
  net->add(std::make_shared<nn::BatchNorm2d>(2));
  net->add(nn::ReLU());
  if (dropout) net->add(std::make_shared<nn::Dropout>(0.3, &g));
  net->add(std::make_shared<nn::Flatten>());
  net->add(std::make_shared<nn::Linear>(32, 3, true, &g));
  return net;
}

}  // namespace anvil::test
