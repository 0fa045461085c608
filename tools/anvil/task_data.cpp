// SPDX-License-Identifier: Apache-2.0
// Finding, reading and shaping the dataset of an `anvil train` run (task_data.h).
#include "tools/anvil/task_data.h"

#include <cstdlib>
#include <filesystem>

#include "data/cifar.h"
#include "data/idx.h"
#include "data/imdb.h"
#include "data/ptb.h"
#include "engine/core/error.h"

namespace anvil::tools {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWhere = "anvil train";

std::string env_dir(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

bool has_file(const fs::path& dir, const char* name) { return fs::exists(dir / name); }

enum class Format { mnist, cifar10, imdb, ptb };

// The format of a dataset folder, from the files in it.
Format detect_format(const fs::path& dir) {
  if (has_file(dir, "train-images-idx3-ubyte") || has_file(dir, "train-images-idx3-ubyte.gz"))
    return Format::mnist;
  if (has_file(dir, "data_batch_1.bin")) return Format::cifar10;
  if (has_file(dir, "imdb_word_index.json")) return Format::imdb;
  if (has_file(dir, "ptb.valid.txt")) return Format::ptb;
  fail(kWhere, "dataset folder ", dir.string(),
       " holds no known dataset (looked for train-images-idx3-ubyte[.gz], data_batch_1.bin, "
       "imdb_word_index.json, ptb.valid.txt)");
}

// Keeps the first `n` samples (n <= 0 or n >= size: all).
data::TensorDataset first(const data::TensorDataset& ds, std::int64_t n) {
  if (n <= 0 || n >= ds.size()) return ds;
  return data::take(ds, 0, n);
}

// Reshapes per-sample inputs to the model's sample shape and targets to what its loss wants.
data::TensorDataset shape_for_model(const models::ModelInfo& model, Tensor inputs,
                                    const Tensor& labels, std::int64_t num_classes,
                                    const std::string& source) {
  const std::int64_t n = inputs.sizes()[0];
  const std::int64_t per_sample = inputs.numel() / std::max<std::int64_t>(n, 1);
  const std::int64_t wanted = shape_numel(model.sample_shape);
  ANVIL_CHECK(per_sample == wanted, kWhere, "model ", model.name, " takes samples of shape ",
              shape_str(model.sample_shape), " (", wanted, " values) but ", source,
              " has samples of shape ",
              shape_str(Shape(inputs.sizes().begin() + 1, inputs.sizes().end())), " (", per_sample,
              " values)");
  Shape shape{n};
  shape.insert(shape.end(), model.sample_shape.begin(), model.sample_shape.end());
  inputs = inputs.reshape(shape);
  if (model.loss == models::LossKind::binary_cross_entropy) {
    ANVIL_CHECK(num_classes == 2, kWhere, "model ", model.name, " is a binary classifier but ",
                source, " has ", num_classes, " classes");
    return {inputs, labels.to(DType::f32).reshape({n, 1})};
  }
  ANVIL_CHECK(num_classes <= model.num_classes, kWhere, "model ", model.name, " has ",
              model.num_classes, " outputs but ", source, " has ", num_classes, " classes");
  return {inputs, labels};
}

TaskData classification(const std::string& description, const data::TensorDataset& train_all,
                        const data::TensorDataset& test, double val_split, std::int64_t subset) {
  TaskData t;
  t.description = description;
  auto split = data::split_validation(first(train_all, subset), val_split);
  t.train = std::move(split.train);
  t.val = std::move(split.val);
  t.test = first(test, subset);
  return t;
}

TaskData image_task(const models::ModelInfo& model, const std::string& description,
                    const data::ImageDataset& train, const data::ImageDataset& test,
                    double val_split, std::int64_t subset) {
  ANVIL_CHECK(model.input == models::InputKind::features, kWhere, "model ", model.name,
              " takes token ids, not the images of ", description);
  return classification(
      description,
      shape_for_model(model, train.images, train.labels, train.num_classes, train.source),
      shape_for_model(model, test.images, test.labels, test.num_classes, test.source), val_split,
      subset);
}

TaskData imdb_task(const models::ModelInfo& model, const fs::path& dir, double val_split,
                   std::int64_t subset) {
  ANVIL_CHECK(model.input == models::InputKind::tokens && model.sample_shape.size() == 1, kWhere,
              "model ", model.name,
              " does not take token sequences; IMDB needs a sequence classifier such as lstm_imdb");
  const std::string index = (dir / "imdb_word_index.json").string();
  const std::int64_t maxlen = model.sample_shape[0];
  auto read = [&](const char* file) {
    const auto s = data::read_imdb((dir / file).string(), index, model.vocab_size, maxlen);
    return shape_for_model(model, s.tokens, s.labels, s.num_classes, s.source);
  };
  return classification("imdb (" + dir.string() + ")", read("train.tsv"), read("test.tsv"),
                        val_split, subset);
}

std::vector<std::int64_t> first_tokens(std::vector<std::int64_t> ids, std::int64_t n) {
  if (n > 0 && n < static_cast<std::int64_t>(ids.size())) ids.resize(static_cast<std::size_t>(n));
  return ids;
}

TaskData ptb_task(const models::ModelInfo& model, const fs::path& dir, double val_split,
                  std::int64_t subset) {
  ANVIL_CHECK(model.loss == models::LossKind::sequence_cross_entropy, kWhere, "model ", model.name,
              " is not a language model; PTB needs ptb_small, lstm32 or lstm64");
  const bool has_train = has_file(dir, "ptb.train.txt");
  std::vector<std::string> files;
  for (const char* f : {"ptb.train.txt", "ptb.valid.txt", "ptb.test.txt"})
    if (has_file(dir, f)) files.push_back((dir / f).string());
  ANVIL_CHECK(has_file(dir, "ptb.test.txt"), kWhere, "PTB folder ", dir.string(),
              " has no ptb.test.txt");
  const auto vocab = data::Vocabulary::build(files);
  ANVIL_CHECK(vocab.size() <= model.vocab_size, kWhere, "PTB vocabulary of ", vocab.size(),
              " words exceeds model ", model.name, "'s ", model.vocab_size);
  TaskData t;
  t.language_model = true;
  t.vocab_size = vocab.size();
  t.description = "ptb (" + dir.string() + ")";
  const auto valid = data::read_ptb_ids((dir / "ptb.valid.txt").string(), vocab);
  t.lm_test = first_tokens(data::read_ptb_ids((dir / "ptb.test.txt").string(), vocab), subset);
  if (has_train) {
    t.lm_train = first_tokens(data::read_ptb_ids((dir / "ptb.train.txt").string(), vocab), subset);
    t.lm_val = valid;
  } else {  // Note [PTB splits in anvil train]
    const auto stream = first_tokens(valid, subset);
    const auto n_val = static_cast<std::size_t>(static_cast<double>(stream.size()) * val_split);
    ANVIL_CHECK(n_val < stream.size(), kWhere, "--val-split ", val_split,
                " leaves no PTB training text");
    t.lm_train.assign(stream.begin(), stream.end() - static_cast<std::ptrdiff_t>(n_val));
    t.lm_val.assign(stream.end() - static_cast<std::ptrdiff_t>(n_val), stream.end());
  }
  return t;
}

}  // namespace

TaskData load_task_data(const models::ModelInfo& model, const std::string& dataset,
                        double val_split, std::int64_t subset) {
  ANVIL_CHECK(val_split >= 0.0 && val_split < 1.0, kWhere, "--val-split must be in [0, 1), got ",
              val_split);
  if (dataset == "fashion-mnist") {
    const std::string dir = env_dir("ANVIL_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist");
    ANVIL_CHECK(fs::is_directory(dir), kWhere, "Fashion-MNIST folder ", dir,
                " not found (install the Debian package dataset-fashion-mnist, or set "
                "ANVIL_FASHION_MNIST_DIR)");
    return image_task(model, "fashion-mnist (" + dir + ")", data::read_mnist_dir(dir, "train"),
                      data::read_mnist_dir(dir, "t10k"), val_split, subset);
  }
  fs::path dir = dataset;
  if (dataset == "ptb") dir = env_dir("ANVIL_PTB_DIR", ANVIL_DEFAULT_PTB_DIR);
  ANVIL_CHECK(fs::is_directory(dir), kWhere, "unknown dataset '", dataset,
              "': not a folder, and not one of fashion-mnist, ptb");
  switch (detect_format(dir)) {
    case Format::mnist:
      return image_task(model, "mnist-format (" + dir.string() + ")",
                        data::read_mnist_dir(dir.string(), "train"),
                        data::read_mnist_dir(dir.string(), "t10k"), val_split, subset);
    case Format::cifar10:
      return image_task(model, "cifar10 (" + dir.string() + ")",
                        data::read_cifar10_dir(dir.string(), "train"),
                        data::read_cifar10_dir(dir.string(), "test"), val_split, subset);
    case Format::imdb:
      return imdb_task(model, dir, val_split, subset);
    case Format::ptb:
      return ptb_task(model, dir, val_split, subset);
  }
  fail(kWhere, "unreachable dataset format");
}

void check_split_sizes(const TaskData& task, std::int64_t batch, double val_split) {
  auto check = [&](const char* split, std::int64_t n, const char* unit, std::int64_t needed,
                   const char* remedy) {
    ANVIL_CHECK(n >= needed, kWhere, "the ", split, " split of ", task.description, " has ", n, " ",
                unit, ", too few for this run (at least ", needed, " needed", remedy, ")");
  };
  if (task.language_model) {
    const std::int64_t needed = 2 * batch;  // 2 tokens (input and target) per row of the batch
    const char* remedy = "; a larger --subset or a smaller --batch";
    check("training", static_cast<std::int64_t>(task.lm_train.size()), "tokens", needed, remedy);
    if (val_split > 0 || !task.lm_val.empty())  // ptb.valid.txt validates whatever --val-split
      check("validation", static_cast<std::int64_t>(task.lm_val.size()), "tokens", needed,
            "; a larger --val-split or --subset, or a smaller --batch");
    check("test", static_cast<std::int64_t>(task.lm_test.size()), "tokens", needed, remedy);
    return;
  }
  check("training", task.train.size(), "samples", 1, "; a larger --subset");
  if (val_split > 0)
    check("validation", task.val.inputs.defined() ? task.val.size() : 0, "samples", 1,
          "; a larger --val-split or --subset, or --val-split 0");
  check("test", task.test.size(), "samples", 1, "; a larger --subset");
}

}  // namespace anvil::tools
