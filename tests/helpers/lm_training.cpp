// SPDX-License-Identifier: Apache-2.0
// train_language_model (tests/helpers/lm_training.h).
#include "helpers/lm_training.h"

#include "data/ptb.h"
#include "engine/autograd/functions.h"

namespace anvil::test {

void train_language_model(models::LstmLanguageModel& net, optim::Optimizer& opt,
                          const std::vector<std::int64_t>& ids, std::int64_t batch,
                          std::int64_t seq_len, int epochs, Device device,
                          std::vector<double>* window_losses) {
  auto on = [&](const Tensor& t) { return t.device() == device ? t : t.to(device); };
  for (int epoch = 0; epoch < epochs; ++epoch) {
    net.train();
    net.reset_state();
    data::PtbBatcher batches(ids, batch, seq_len);
    while (batches.has_next()) {
      const data::PtbBatch b = batches.next();
      opt.zero_grad();
      Tensor loss = cross_entropy(net.forward(on(b.inputs)), on(b.targets.flatten())) *
                    static_cast<double>(b.targets.sizes()[1]);
      if (window_losses != nullptr) window_losses->push_back(loss.item());
      loss.backward();
      // On the CPU this is clip_grad_norm_; on one GPU it stays on the device.
      (void)optim::clip_grad_norm_async_(net.parameters(), 5.0);
      opt.step();
    }
  }
}

}  // namespace anvil::test
