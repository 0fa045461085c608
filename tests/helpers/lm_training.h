// SPDX-License-Identifier: Apache-2.0
#pragma once
// The PTB training recipe of the language-model tests (tests/test_ptb_training.cpp,
// tests/cuda/test_cuda_lstm.cpp): epochs of truncated BPTT over consecutive [B, T] windows
// (data::PtbBatcher), networks.md's loss (cross-entropy summed over the T steps, averaged over
// the batch), gradients clipped to norm 5, one optimizer step per window.
#include <cstdint>
#include <vector>

#include "engine/core/device.h"
#include "models/lstm_language_model.h"
#include "engine/optim/optimizer.h"

namespace anvil::test {

// `net` and `opt`'s parameters live on `device`; the windows are moved there. With
// `window_losses`, each window's loss is appended to it (one host read per window).
void train_language_model(models::LstmLanguageModel& net, optim::Optimizer& opt,
                          const std::vector<std::int64_t>& ids, std::int64_t batch,
                          std::int64_t seq_len, int epochs, Device device = Device::cpu(),
                          std::vector<double>* window_losses = nullptr);

}  // namespace anvil::test
