// SPDX-License-Identifier: Apache-2.0
// evaluate_language_model (models/language_model_eval.h): perplexity over a token stream.
#include "models/language_model_eval.h"

#include <cmath>

#include "data/ptb.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"

namespace anvil::models {

LanguageModelEval evaluate_language_model(nn::Module& net, const std::vector<std::int64_t>& ids,
                                          std::int64_t batch, std::int64_t seq_len, Device device,
                                          dist::Communicator* comm) {
  const bool sharded = comm != nullptr && comm->size() > 1;
  auto on = [&](const Tensor& t) { return t.device() == device ? t : t.to(device); };
  NoGradGuard no_grad;
  net.eval();
  net.reset_state();
  data::PtbBatcher batches(ids, batch, seq_len);
  double nll = 0;
  std::int64_t count = 0;
  while (batches.has_next()) {
    const data::PtbBatch b =
        sharded ? data::shard_rows(batches.next(), comm->size(), comm->rank()) : batches.next();
    const Tensor logits = net.forward(on(b.inputs));
    const std::int64_t n = b.targets.numel();
    nll += cross_entropy(logits, on(b.targets.flatten())).item() * static_cast<double>(n);
    count += n;
  }
  net.reset_state();
  if (sharded) {
    Tensor sums = Tensor::from_vector(std::vector<double>{nll, static_cast<double>(count)}, {2});
    comm->all_reduce(sums, dist::ReduceOp::sum);
    nll = sums.data<double>()[0];
    count = static_cast<std::int64_t>(std::llround(sums.data<double>()[1]));
  }
  const double mean = nll / static_cast<double>(count);
  return {mean, std::exp(mean)};
}

}  // namespace anvil::models
