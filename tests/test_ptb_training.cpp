// SPDX-License-Identifier: Apache-2.0
// Real text: a small two-layer LSTM language model (ptb_small's structure at width 64) trained on
// PTB's validation part for two epochs must reach a test perplexity far below the vocabulary
// size, and below the unigram model of the same training text (so it learned context, not only
// word frequencies). Prints the numbers.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

#include "anvil/anvil.h"
#include "helpers/datasets.h"
#include "helpers/lm_training.h"
#include "models/language_model_eval.h"

using namespace anvil;

namespace {

// Perplexity of `net` on a token stream, state carried across consecutive windows: the
// trainer's metric (models/language_model_eval.h).
double perplexity(models::LstmLanguageModel& net, const std::vector<std::int64_t>& ids,
                  std::int64_t batch, std::int64_t seq_len) {
  return models::evaluate_language_model(net, ids, batch, seq_len).perplexity;
}

// Perplexity of the add-one-smoothed unigram model of `train` on `test`.
double unigram_perplexity(const std::vector<std::int64_t>& train,
                          const std::vector<std::int64_t>& test, std::int64_t vocab) {
  std::vector<double> counts(static_cast<std::size_t>(vocab), 1.0);
  for (auto id : train) counts[static_cast<std::size_t>(id)] += 1.0;
  const double total = static_cast<double>(train.size() + static_cast<std::size_t>(vocab));
  double nll = 0;
  for (auto id : test) nll -= std::log(counts[static_cast<std::size_t>(id)] / total);
  return std::exp(nll / static_cast<double>(test.size()));
}

}  // namespace

TEST_CASE("an LSTM language model trained on PTB valid lowers the PTB test perplexity",
          "[lstm][ptb][real_data]") {
  const auto vocab = data::Vocabulary::build(test::ptb_file("ptb.valid.txt"));
  const auto train = data::read_ptb_ids(test::ptb_file("ptb.valid.txt"), vocab);
  const auto held_out =
      data::read_ptb_ids(test::ptb_file("ptb.test.txt"), vocab, data::UnknownWords::kMapToUnk);
  const std::int64_t V = vocab.size(), B = 20, T = 20;

  Generator gen(2026);
  models::LstmLanguageModel net(V, 64, 64, 2, /*two_biases=*/false, &gen);
  for (auto& p : net.parameters()) nn::init::uniform_(p, -0.1, 0.1, &gen);  // Zaremba's init
  optim::SGD opt(net.parameters(), 1.0);

  const double before = perplexity(net, held_out, B, T);
  anvil::test::train_language_model(net, opt, train, B, T, /*epochs=*/2);
  const double after = perplexity(net, held_out, B, T);
  const double unigram = unigram_perplexity(train, held_out, V);
  std::printf(
      "PTB: vocabulary %lld, train %zu tokens (valid), test %zu tokens; test perplexity "
      "%.1f before, %.1f after 2 epochs; unigram model %.1f\n",
      static_cast<long long>(V), train.size(), held_out.size(), before, after, unigram);
  INFO("perplexity before " << before << ", after " << after << ", unigram " << unigram);
  CHECK(before > 0.5 * static_cast<double>(V));  // untrained: close to uniform over V
  CHECK(after < static_cast<double>(V) / 10);    // far below the vocabulary size
  CHECK(after < unigram);                        // better than word frequencies alone
}
