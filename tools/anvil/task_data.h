// SPDX-License-Identifier: Apache-2.0
#pragma once
// The data of one `anvil train` run: a dataset found by name or path, read by the data/ readers,
// checked against the model and split into train / validation / test in the form the model's
// loss expects.
//
// Datasets (--dataset):
//   fashion-mnist        the Debian package's IDX files (ANVIL_FASHION_MNIST_DIR overrides
//                        /usr/share/datasets/fashion-mnist)
//   ptb                  PTB text: ANVIL_PTB_DIR, else the copy in the repository
//                        (data/datasets/ptb: validation and test parts only)
//   PATH (a folder)      recognised by its files: train-images-idx3-ubyte[.gz] (MNIST format),
//                        data_batch_1.bin (CIFAR-10 binary), imdb_word_index.json + train.tsv +
//                        test.tsv (IMDB, Keras word-index form), ptb.valid.txt (PTB text)
//
// Note [PTB splits in anvil train]
// With ptb.train.txt present, PTB trains on it, validates on ptb.valid.txt and tests on
// ptb.test.txt. The shared copy has no training part, so then the first (1 - val_split) of
// ptb.valid.txt trains, the rest validates, and ptb.test.txt tests. The vocabulary is the word
// list of all PTB files present (ids by frequency in them): the full corpus' 10,000-word
// vocabulary covers every test word too, so no test word is unknown either way; no statistic of
// the test text enters training.
#include <cstdint>
#include <string>
#include <vector>

#include "data/loader.h"
#include "models/registry.h"

namespace anvil::tools {

struct TaskData {
  std::string description;  // "fashion-mnist (/usr/share/datasets/fashion-mnist)"
  bool language_model = false;
  // Classification: inputs [N, sample_shape...], targets as the model's loss wants them.
  data::TensorDataset train, val, test;  // val may be empty (undefined tensors)
  // Language models: token id streams (Note [PTB splits in anvil train]).
  std::vector<std::int64_t> lm_train, lm_val, lm_test;
  std::int64_t vocab_size = 0;
};

// subset > 0 keeps the first `subset` samples of the training and of the test set (tokens for
// PTB) before the validation split: a quick run on real data.
TaskData load_task_data(const models::ModelInfo& model, const std::string& dataset,
                        double val_split, std::int64_t subset);

// Note [Splits too small for the model]
// Refuses, before training, a split that the run cannot use: an empty training or test split,
// a validation split that --val-split asks for but holds no sample, and for language models a
// token stream shorter than 2 tokens per row of the batch (PtbBatcher's minimum, which
// evaluation used to hit only after the first epoch had trained). Throws anvil::Error naming
// the split, its size and what it needs.
void check_split_sizes(const TaskData& task, std::int64_t batch, double val_split);

}  // namespace anvil::tools
