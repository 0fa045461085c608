// SPDX-License-Identifier: Apache-2.0
#pragma once
// In-memory datasets and the mini-batch loader of `anvil train`: seeded shuffling, batching,
// normalisation, and a background thread that prepares the next batches while a step runs.
//
//   data::TensorDataset train{images, labels};
//   data::DataLoader loader(train, {.batch = 80, .shuffle = true, .seed = 1});
//   loader.start_epoch(0);
//   while (auto b = loader.next()) step(b->inputs, b->targets);
// or, one epoch per loop (Note [Loader as a range]):
//   for (int e = 0; e < epochs; ++e)
//     for (auto& batch : loader) step(batch.inputs, batch.targets);
//
// Note [Reproducible data order]
// The order of epoch e is a permutation drawn from Generator(seed ^ f(e)) alone, never from a
// generator shared with the model, so epoch e has the same batches whether the run started at
// epoch 0 or was resumed from a checkpoint at epoch e (and whether batches are prepared by the
// background thread or inline). start_epoch(e, skip) also resumes inside an epoch.
//
// Note [Loader thread]
// With `background` on, one producer thread gathers (and normalises) up to `prefetch` batches
// ahead into a bounded queue; next() takes from the queue and only waits when the producer is
// behind. wait_seconds() is that waiting time, i.e. what the data pipeline costs the training
// loop; with `background` off, next() gathers inline and wait_seconds() is the gather time. The
// producer touches only the dataset (read-only) and its own batch tensors, so it needs no other
// synchronisation; an error in the producer is rethrown by next().
//
// Note [Pinned batches]
// A GPU can copy host memory to itself asynchronously only from page-locked (pinned) memory;
// from ordinary pageable memory every copy is staged and waited for (Note [Pinned staging] in
// kernels/cuda/host_staging.h). With `pin_memory`, the loader gathers every batch straight
// into page-locked memory (CudaBackend::pinned_host_allocator, a cache of cudaHostAlloc'd
// blocks), so the training loop can hand it to CudaBackend::copy_to_device_async and go on:
// the copy runs on the device's copy stream while the previous step computes, and the compute
// stream waits for it with an event (TrainingStep's BatchSource::pinned is that double
// buffering). A pinned batch must stay alive and unchanged until its copy is done (the caller
// keeps it until the step that consumed it has ended). `batch_allocator` puts batches in any
// other allocator (tests use it without a GPU); the contents and order of the batches do not
// depend on where they live.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <iterator>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/core/tensor.h"

namespace anvil::data {

// Samples along dim 0: inputs [N, ...] (any dtype) and targets [N, ...] (any dtype).
struct TensorDataset {
  Tensor inputs;
  Tensor targets;
  std::int64_t size() const;  // N; throws when inputs and targets disagree
};

// Rows [begin, end) of both tensors, as copies of their own; throws on an empty or bad range.
TensorDataset take(const TensorDataset& ds, std::int64_t begin, std::int64_t end);

// Keras' validation_split: the last `fraction` of the samples (before any shuffling) become the
// validation set. fraction in [0, 1); 0 gives an empty validation set (undefined tensors).
struct TrainValSplit {
  TensorDataset train;
  TensorDataset val;
};
TrainValSplit split_validation(const TensorDataset& ds, double fraction);

// x' = (x - mean) / std for float inputs, applied while a batch is gathered. The default is the
// identity. from_data() takes the mean and std over all input values of a (training) set.
struct Normalization {
  double mean = 0.0;
  double std = 1.0;
  static Normalization from_data(const Tensor& inputs);
};

struct LoaderOptions {
  std::int64_t batch = 32;
  bool shuffle = true;
  std::uint64_t seed = 1;
  bool drop_last = false;  // leave out a last batch smaller than `batch`
  bool background = true;  // Note [Loader thread]
  int prefetch = 2;        // batches prepared ahead by the background thread
  Normalization normalization;
  // Note [Pinned batches]: gather batches into page-locked host memory (needs the CUDA
  // backend; the constructor throws without it), or into `batch_allocator` when that is set.
  bool pin_memory = false;
  Allocator* batch_allocator = nullptr;
  // Distributed sampler (Note [Sharded epochs]): this loader is shard `shard` of `num_shards`.
  std::int64_t num_shards = 1;
  std::int64_t shard = 0;
};

// Note [Sharded epochs]
// With num_shards = S > 1 every rank draws the same permutation of epoch e (Note [Reproducible
// data order]) and cuts it into global batches of S x batch samples; rank r's batch i is the r-th
// block of `batch` samples of global batch i. So S ranks at batch b see, step by step, exactly
// the samples one process sees at batch S x b, and the mean of their gradients is that
// process's gradient. A last, smaller global batch is split evenly when S divides it, and left
// out otherwise (every rank must take the same number of steps).

struct LoadedBatch {
  Tensor inputs;   // [b, ...], float inputs normalised
  Tensor targets;  // [b, ...]
};

// Note [Loader as a range]
// `for (auto& batch : loader)` runs one epoch, as libtorch's `for (auto& batch : *loader)`.
// begin() starts the epoch after the last one started (epoch 0 the first time), so that
// consecutive loops visit epochs 0, 1, 2, ... in the orders of Note [Reproducible data order];
// but when start_epoch(e, skip) was called and no batch of it taken yet, the loop runs that
// epoch from there, which is how a run resumed from a checkpoint continues. Leaving a loop early
// abandons the rest of its epoch (the producer thread is stopped by the next start_epoch or the
// destructor). The iterator is a single-pass input iterator over next(): it holds the current
// batch, and two iterators of one loader share its position.

class DataLoader {
 public:
  DataLoader(TensorDataset dataset, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  std::int64_t batches_per_epoch() const;
  std::int64_t dataset_size() const { return size_; }
  // Starts epoch `epoch` (Note [Reproducible data order]), skipping its first `skip_batches`.
  // Stops a running producer first.
  void start_epoch(std::int64_t epoch, std::int64_t skip_batches = 0);
  // The next batch of the epoch, or nullopt at its end. Rethrows a producer error.
  std::optional<LoadedBatch> next();
  // Seconds next() spent waiting for (or, inline, gathering) batches since the last start_epoch.
  double wait_seconds() const { return wait_seconds_; }
  // The epoch last started (by start_epoch or begin()); -1 before the first.
  std::int64_t epoch() const { return epoch_; }

  // ---- range-for over one epoch (Note [Loader as a range]) ----------------------------------
  struct Sentinel {};
  class Iterator {
   public:
    // The member types std::iterator_traits reads, under the names the standard gives them.
    // NOLINTBEGIN(readability-identifier-naming)
    using iterator_concept = std::input_iterator_tag;
    using iterator_category = std::input_iterator_tag;
    using value_type = LoadedBatch;
    using difference_type = std::ptrdiff_t;
    using pointer = LoadedBatch*;
    using reference = LoadedBatch&;
    // NOLINTEND(readability-identifier-naming)

    Iterator() = default;
    LoadedBatch& operator*() const { return *batch_; }
    LoadedBatch* operator->() const { return &*batch_; }
    Iterator& operator++() {
      batch_ = loader_->next();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const Iterator& it, Sentinel) { return !it.batch_.has_value(); }

   private:
    friend class DataLoader;
    explicit Iterator(DataLoader* loader) : loader_(loader), batch_(loader->next()) {}
    DataLoader* loader_ = nullptr;
    // mutable: operator* of an input iterator is const and hands out the batch to change.
    mutable std::optional<LoadedBatch> batch_;
  };
  // Starts the next epoch, or the one start_epoch prepared (Note [Loader as a range]).
  Iterator begin();
  Sentinel end() const { return {}; }

 private:
  LoadedBatch gather(std::int64_t batch_index) const;
  void stop_producer();
  void produce(std::int64_t first, std::int64_t last);

  TensorDataset ds_;
  LoaderOptions opt_;
  Allocator* batch_allocator_ = nullptr;  // null: the CPU allocator
  std::int64_t size_ = 0;
  std::vector<std::int64_t> order_;  // sample order of the current epoch
  std::int64_t next_batch_ = 0;      // inline mode: the next batch to gather
  std::int64_t end_batch_ = 0;
  double wait_seconds_ = 0.0;
  std::int64_t epoch_ = -1;
  bool epoch_untouched_ = false;  // start_epoch ran and next() has not been called since

  // Background producer (Note [Loader thread]).
  std::thread producer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<LoadedBatch> queue_;
  bool producer_done_ = false;
  bool stop_ = false;
  std::exception_ptr producer_error_;
};

}  // namespace anvil::data
