// SPDX-License-Identifier: Apache-2.0
// TensorDataset helpers and DataLoader (Notes [Reproducible data order] and [Loader thread] in
// loader.h).
#include "data/loader.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "engine/core/cuda_backend.h"
#include "engine/core/error.h"
#include "engine/core/random.h"

namespace anvil::data {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

Shape with_rows(const Shape& shape, std::int64_t rows) {
  Shape s = shape;
  s[0] = rows;
  return s;
}

// Copies the given rows of `src` (contiguous, dim 0 = samples) into a new tensor.
// `allocator` null: the CPU allocator (Note [Pinned batches]).
Tensor gather_rows(const Tensor& src, const std::int64_t* rows, std::int64_t count,
                   Allocator* allocator) {
  Tensor out = allocator != nullptr
                   ? Tensor::empty_in(*allocator, with_rows(src.sizes(), count), src.dtype())
                   : Tensor::empty(with_rows(src.sizes(), count), src.dtype());
  const std::size_t row_bytes = src.nbytes() / static_cast<std::size_t>(src.sizes()[0]);
  const auto* in = static_cast<const std::uint8_t*>(src.data_ptr());
  auto* o = static_cast<std::uint8_t*>(out.data_ptr());
  for (std::int64_t i = 0; i < count; ++i)
    std::memcpy(o + static_cast<std::size_t>(i) * row_bytes,
                in + static_cast<std::size_t>(rows[i]) * row_bytes, row_bytes);
  return out;
}

void normalise_in_place(Tensor& t, const Normalization& n) {
  if (n.mean == 0.0 && n.std == 1.0) return;
  const float mean = static_cast<float>(n.mean);
  const float inv_std = static_cast<float>(1.0 / n.std);
  float* p = t.data<float>();
  const std::int64_t count = t.numel();
  for (std::int64_t i = 0; i < count; ++i) p[i] = (p[i] - mean) * inv_std;
}

// A per-epoch seed: splitmix64 of (seed, epoch), so neighbouring epochs get unrelated orders.
std::uint64_t epoch_seed(std::uint64_t seed, std::int64_t epoch) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(epoch + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::int64_t TensorDataset::size() const {
  ANVIL_CHECK(inputs.defined() && targets.defined(), "TensorDataset",
              "inputs and targets must be defined");
  ANVIL_CHECK(inputs.dim() >= 1 && targets.dim() >= 1, "TensorDataset",
              "inputs and targets need a sample dimension, got ", shape_str(inputs.sizes()),
              " and ", shape_str(targets.sizes()));
  ANVIL_CHECK(inputs.sizes()[0] == targets.sizes()[0], "TensorDataset", "inputs have ",
              inputs.sizes()[0], " samples but targets have ", targets.sizes()[0]);
  return inputs.sizes()[0];
}

TensorDataset take(const TensorDataset& ds, std::int64_t begin, std::int64_t end) {
  const std::int64_t n = ds.size();
  ANVIL_CHECK(0 <= begin && begin < end && end <= n, "data::take", "range [", begin, ", ", end,
              ") is empty or outside the ", n, " samples");
  // clone(), not contiguous(): a slice of a contiguous tensor is contiguous and would keep the
  // whole dataset's storage alive behind a small subset.
  return {ds.inputs.slice(0, begin, end).clone(), ds.targets.slice(0, begin, end).clone()};
}

TrainValSplit split_validation(const TensorDataset& ds, double fraction) {
  ANVIL_CHECK(fraction >= 0.0 && fraction < 1.0, "data::split_validation",
              "fraction must be in [0, 1), got ", fraction);
  const std::int64_t n = ds.size();
  const auto n_val = static_cast<std::int64_t>(std::floor(static_cast<double>(n) * fraction));
  if (n_val == 0) return {ds, {}};
  ANVIL_CHECK(n_val < n, "data::split_validation", "a fraction of ", fraction, " of ", n,
              " samples leaves no training samples");
  return {take(ds, 0, n - n_val), take(ds, n - n_val, n)};
}

Normalization Normalization::from_data(const Tensor& inputs) {
  ANVIL_CHECK(inputs.dtype() == DType::f32, "Normalization::from_data", "needs f32 inputs, got ",
              dtype_name(inputs.dtype()));
  const Tensor c = inputs.contiguous();
  const float* p = c.data<float>();
  const std::int64_t n = c.numel();
  ANVIL_CHECK(n > 0, "Normalization::from_data", "no values");
  double sum = 0, sum_sq = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    sum += p[i];
    sum_sq += static_cast<double>(p[i]) * p[i];
  }
  const double mean = sum / static_cast<double>(n);
  const double var = std::max(sum_sq / static_cast<double>(n) - mean * mean, 0.0);
  ANVIL_CHECK(var > 0, "Normalization::from_data", "the inputs are constant (", mean,
              "): nothing to normalise by");
  return {mean, std::sqrt(var)};
}

DataLoader::DataLoader(TensorDataset dataset, LoaderOptions options)
    : ds_(std::move(dataset)), opt_(options) {
  size_ = ds_.size();
  ANVIL_CHECK(size_ > 0, "DataLoader", "the dataset is empty");
  // Batches are gathered with host copies; a training loop moves each batch with .to(device).
  ANVIL_CHECK(ds_.inputs.device().is_cpu() && ds_.targets.device().is_cpu(), "DataLoader",
              "the dataset must be in host memory, got inputs on ", ds_.inputs.device(),
              " and targets on ", ds_.targets.device(), " (move each batch to the device instead)");
  ANVIL_CHECK(opt_.batch > 0, "DataLoader", "batch must be positive, got ", opt_.batch);
  ANVIL_CHECK(opt_.prefetch >= 1, "DataLoader", "prefetch must be at least 1, got ", opt_.prefetch);
  ANVIL_CHECK(opt_.normalization.std > 0, "DataLoader", "normalization std must be positive, got ",
              opt_.normalization.std);
  ANVIL_CHECK(opt_.num_shards >= 1 && opt_.shard >= 0 && opt_.shard < opt_.num_shards, "DataLoader",
              "shard ", opt_.shard, " of ", opt_.num_shards, " is not a shard");
  ANVIL_CHECK(size_ >= opt_.batch * opt_.num_shards || opt_.num_shards == 1, "DataLoader",
              opt_.num_shards, " shards of batch ", opt_.batch, " leave no batch of the ", size_,
              " samples");
  ANVIL_CHECK(!opt_.drop_last || size_ >= opt_.batch, "DataLoader", "drop_last with batch ",
              opt_.batch, " leaves no batch of the ", size_, " samples");
  const bool normalises = opt_.normalization.mean != 0.0 || opt_.normalization.std != 1.0;
  ANVIL_CHECK(!normalises || ds_.inputs.dtype() == DType::f32, "DataLoader",
              "normalization needs f32 inputs, got ", dtype_name(ds_.inputs.dtype()));
  ds_.inputs = ds_.inputs.contiguous();
  ds_.targets = ds_.targets.contiguous();
  // Note [Pinned batches]: an explicit allocator wins; pin_memory asks the CUDA backend.
  batch_allocator_ = opt_.batch_allocator;
  if (batch_allocator_ == nullptr && opt_.pin_memory)
    batch_allocator_ = &require_cuda("DataLoader (pin_memory)").pinned_host_allocator();
  ANVIL_CHECK(batch_allocator_ == nullptr || batch_allocator_->device().is_cpu(), "DataLoader",
              "batch_allocator must hand out host memory, got one of ",
              batch_allocator_ != nullptr ? batch_allocator_->device() : Device::cpu());
  order_.resize(static_cast<std::size_t>(size_));
}

DataLoader::~DataLoader() { stop_producer(); }

std::int64_t DataLoader::batches_per_epoch() const {
  if (opt_.num_shards > 1) {  // Note [Sharded epochs]
    const std::int64_t global = opt_.batch * opt_.num_shards, rest = size_ % global;
    return size_ / global + (!opt_.drop_last && rest > 0 && rest % opt_.num_shards == 0 ? 1 : 0);
  }
  return opt_.drop_last ? size_ / opt_.batch : (size_ + opt_.batch - 1) / opt_.batch;
}

void DataLoader::start_epoch(std::int64_t epoch, std::int64_t skip_batches) {
  ANVIL_CHECK(epoch >= 0, "DataLoader::start_epoch", "epoch must be >= 0, got ", epoch);
  ANVIL_CHECK(0 <= skip_batches && skip_batches <= batches_per_epoch(), "DataLoader::start_epoch",
              "skip_batches ", skip_batches, " outside [0, ", batches_per_epoch(), "]");
  stop_producer();
  std::iota(order_.begin(), order_.end(), std::int64_t{0});
  if (opt_.shuffle) {
    std::mt19937_64 engine(epoch_seed(opt_.seed, epoch));
    std::shuffle(order_.begin(), order_.end(), engine);
  }
  next_batch_ = skip_batches;
  end_batch_ = batches_per_epoch();
  wait_seconds_ = 0.0;
  epoch_ = epoch;
  epoch_untouched_ = true;
  if (opt_.background) {
    producer_done_ = false;
    stop_ = false;
    producer_error_ = nullptr;
    producer_ =
        std::thread([this, first = next_batch_, last = end_batch_] { produce(first, last); });
  }
}

DataLoader::Iterator DataLoader::begin() {
  // Note [Loader as a range]: the epoch start_epoch prepared, else the one after the last.
  if (!epoch_untouched_) start_epoch(epoch_ + 1);
  return Iterator(this);
}

LoadedBatch DataLoader::gather(std::int64_t batch_index) const {
  std::int64_t begin = batch_index * opt_.batch;
  std::int64_t count = std::min(opt_.batch, size_ - begin);
  if (opt_.num_shards > 1) {  // Note [Sharded epochs]
    const std::int64_t global_begin = batch_index * opt_.batch * opt_.num_shards;
    const std::int64_t global_count = std::min(opt_.batch * opt_.num_shards, size_ - global_begin);
    count = global_count / opt_.num_shards;
    begin = global_begin + opt_.shard * count;
  }
  const std::int64_t* rows = order_.data() + begin;
  LoadedBatch b{gather_rows(ds_.inputs, rows, count, batch_allocator_),
                gather_rows(ds_.targets, rows, count, batch_allocator_)};
  normalise_in_place(b.inputs, opt_.normalization);
  return b;
}

void DataLoader::produce(std::int64_t first, std::int64_t last) {
  try {
    for (std::int64_t i = first; i < last; ++i) {
      LoadedBatch b = gather(i);
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || static_cast<int>(queue_.size()) < opt_.prefetch; });
      if (stop_) return;
      queue_.push_back(std::move(b));
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    producer_error_ = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mu_);
  producer_done_ = true;
  cv_.notify_all();
}

std::optional<LoadedBatch> DataLoader::next() {
  const auto t0 = Clock::now();
  epoch_untouched_ = false;
  if (!opt_.background) {
    if (next_batch_ >= end_batch_) return std::nullopt;
    LoadedBatch b = gather(next_batch_++);
    wait_seconds_ += seconds_since(t0);
    return b;
  }
  ANVIL_CHECK(producer_.joinable(), "DataLoader::next", "call start_epoch() first");
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || producer_done_; });
  wait_seconds_ += seconds_since(t0);
  if (queue_.empty()) {
    if (producer_error_) std::rethrow_exception(producer_error_);
    return std::nullopt;
  }
  LoadedBatch b = std::move(queue_.front());
  queue_.pop_front();
  cv_.notify_all();
  return b;
}

void DataLoader::stop_producer() {
  if (!producer_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  producer_.join();
  queue_.clear();
}

}  // namespace anvil::data
