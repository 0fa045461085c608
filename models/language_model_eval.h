// SPDX-License-Identifier: Apache-2.0
#pragma once
// The held-out metric of an LSTM language model (networks.md, PTB): the mean cross-entropy per
// token and its exponential, the perplexity, over a token stream laid out as consecutive
// [batch, seq_len] windows (data::PtbBatcher), the recurrent state carried from window to window
// as in training. One definition for `anvil train` (tools/anvil/trainer.cpp) and the tests.
#include <cstdint>
#include <vector>

#include "engine/core/device.h"
#include "engine/distributed/communicator.h"
#include "engine/nn/module.h"

namespace anvil::models {

struct LanguageModelEval {
  double loss = 0.0;        // mean cross-entropy per target token (nats)
  double perplexity = 0.0;  // exp(loss)
};

// Evaluates `net` (ids [B, T] -> logits [B*T, V], models/lstm_language_model.h) in eval mode
// without gradients; the windows are moved to `device` (where the model lives). The state is
// reset before the first window and after the last (Note [Sequence-model hooks]). With a
// communicator of more than one rank, each rank evaluates its rows of every global window
// (data::shard_rows, Note [Sharded PTB streams]) and the sums are reduced over the ranks: the
// same result as one process, up to rounding.
LanguageModelEval evaluate_language_model(nn::Module& net, const std::vector<std::int64_t>& ids,
                                          std::int64_t batch, std::int64_t seq_len,
                                          Device device = Device::cpu(),
                                          dist::Communicator* comm = nullptr);

}  // namespace anvil::models
