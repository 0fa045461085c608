// SPDX-License-Identifier: Apache-2.0
// DataLoader: every sample once per epoch, reproducible orders (Note [Reproducible data order]),
// the background thread giving exactly the inline batches, resuming inside an epoch,
// normalisation, validation split and bad options.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "data/loader.h"
#include "engine/core/cuda_backend.h"
#include "helpers/counting_dataset.h"

using namespace anvil;
using namespace anvil::data;

namespace {

// Inputs [n, 3] with row i = (i, i, i); targets [n] = i.
TensorDataset counting_dataset(std::int64_t n) { return test::counting_dataset(n, 3); }

std::vector<std::int64_t> epoch_targets(DataLoader& loader, std::int64_t epoch,
                                        std::int64_t skip = 0) {
  loader.start_epoch(epoch, skip);
  std::vector<std::int64_t> out;
  while (auto b = loader.next()) {
    const auto* t = b->targets.data<std::int64_t>();
    const auto* x = b->inputs.data<float>();
    for (std::int64_t i = 0; i < b->targets.numel(); ++i) {
      REQUIRE(x[3 * i] == static_cast<float>(t[i]));  // inputs and targets stay paired
      out.push_back(t[i]);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("DataLoader visits every sample once per epoch, in a seeded order", "[data][loader]") {
  const auto ds = counting_dataset(103);
  for (bool background : {false, true}) {
    DataLoader loader(ds, {.batch = 10, .shuffle = true, .seed = 7, .background = background});
    REQUIRE(loader.batches_per_epoch() == 11);
    auto e0 = epoch_targets(loader, 0);
    auto e1 = epoch_targets(loader, 1);
    REQUIRE(e0 != e1);  // a new order each epoch
    auto sorted = e0;
    std::sort(sorted.begin(), sorted.end());
    for (std::int64_t i = 0; i < 103; ++i) REQUIRE(sorted[static_cast<std::size_t>(i)] == i);
    REQUIRE(epoch_targets(loader, 0) == e0);  // the same epoch again: the same order
  }
}

TEST_CASE("DataLoader's background thread yields exactly the inline batches", "[data][loader]") {
  const auto ds = counting_dataset(250);
  DataLoader inline_loader(ds, {.batch = 16, .seed = 3, .background = false});
  DataLoader threaded(ds, {.batch = 16, .seed = 3, .background = true, .prefetch = 3});
  for (std::int64_t epoch = 0; epoch < 3; ++epoch)
    REQUIRE(epoch_targets(inline_loader, epoch) == epoch_targets(threaded, epoch));
}

TEST_CASE("DataLoader resumes inside an epoch with the same remaining batches", "[data][loader]") {
  const auto ds = counting_dataset(64);
  DataLoader loader(ds, {.batch = 8, .seed = 11});
  const auto full = epoch_targets(loader, 4);
  const auto rest = epoch_targets(loader, 4, /*skip=*/3);
  REQUIRE(rest == std::vector<std::int64_t>(full.begin() + 24, full.end()));
  // A different loader object with the same seed: the same order (nothing hidden in state).
  DataLoader other(ds, {.batch = 8, .seed = 11});
  REQUIRE(epoch_targets(other, 4) == full);
}

TEST_CASE("DataLoader: drop_last, no shuffle, stopping mid-epoch", "[data][loader]") {
  const auto ds = counting_dataset(25);
  DataLoader loader(ds, {.batch = 10, .shuffle = false, .drop_last = true});
  REQUIRE(loader.batches_per_epoch() == 2);
  const auto order = epoch_targets(loader, 0);
  REQUIRE(order.size() == 20);
  for (std::int64_t i = 0; i < 20; ++i) REQUIRE(order[static_cast<std::size_t>(i)] == i);
  // Leaving an epoch early and starting another must not hang or leak the producer.
  loader.start_epoch(1);
  REQUIRE(loader.next().has_value());
  loader.start_epoch(2);
  REQUIRE(epoch_targets(loader, 2).size() == 20);
}

TEST_CASE("DataLoader normalises float inputs while gathering", "[data][loader]") {
  const auto ds = counting_dataset(4);  // values 0..3, each 3 times
  const auto norm = Normalization::from_data(ds.inputs);
  REQUIRE(norm.mean == Approx(1.5));
  REQUIRE(norm.std == Approx(std::sqrt(1.25)));
  DataLoader loader(ds, {.batch = 4, .shuffle = false, .normalization = norm});
  loader.start_epoch(0);
  const auto b = loader.next();
  REQUIRE(b.has_value());
  REQUIRE(b->inputs.data<float>()[0] == Approx(-1.5 / std::sqrt(1.25)));
  REQUIRE(b->inputs.data<float>()[11] == Approx(1.5 / std::sqrt(1.25)));
  REQUIRE(ds.inputs.data<float>()[0] == 0.0f);  // the dataset itself is untouched
}

TEST_CASE("split_validation holds out the last fraction, as Keras does", "[data][loader]") {
  const auto ds = counting_dataset(10);
  const auto s = split_validation(ds, 0.2);
  REQUIRE(s.train.size() == 8);
  REQUIRE(s.val.size() == 2);
  REQUIRE(s.val.targets.data<std::int64_t>()[0] == 8);
  REQUIRE_FALSE(split_validation(ds, 0.0).val.inputs.defined());
  REQUIRE_THROWS_WITH(split_validation(ds, 1.0), Catch::Contains("fraction must be in [0, 1)"));
}

TEST_CASE("DataLoader rejects bad options with clear errors", "[data][loader][errors]") {
  const auto ds = counting_dataset(5);
  REQUIRE_THROWS_WITH(DataLoader(ds, {.batch = 0}),
                      Catch::Contains("batch must be positive, got 0"));
  REQUIRE_THROWS_WITH(DataLoader(ds, {.batch = 8, .drop_last = true}),
                      Catch::Contains("leaves no batch"));
  REQUIRE_THROWS_WITH(DataLoader({ds.inputs, ds.targets.slice(0, 0, 3)}, {}),
                      Catch::Contains("inputs have 5 samples but targets have 3"));
  REQUIRE_THROWS_WITH(take(ds, 3, 9), Catch::Contains("outside the 5 samples"));
  DataLoader loader(ds, {.batch = 2});
  REQUIRE_THROWS_WITH(loader.start_epoch(0, 4), Catch::Contains("skip_batches 4 outside [0, 3]"));
}

namespace {
// Host memory posing as page-locked memory: counts its blocks, so the test can see that every
// batch came from it (Note [Pinned batches]).
class CountingHostAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes) override {
    ++blocks;
    return cpu_allocator().allocate(bytes);
  }
  void deallocate(void* p, std::size_t bytes) override { cpu_allocator().deallocate(p, bytes); }
  MemoryStats stats() const override { return {}; }
  void reset_peak() override {}
  void empty_cache() override {}
  Device device() const override { return Device::cpu(); }
  int blocks = 0;
};
}  // namespace

TEST_CASE("DataLoader with a batch allocator (pinned batches) yields the same batches in order",
          "[data][loader][pinned]") {
  const TensorDataset ds = counting_dataset(23);
  for (bool background : {false, true}) {
    CountingHostAllocator pinned;
    DataLoader plain(ds, {.batch = 5, .shuffle = true, .seed = 9, .background = background});
    DataLoader pinned_loader(ds, {.batch = 5,
                                  .shuffle = true,
                                  .seed = 9,
                                  .background = background,
                                  .batch_allocator = &pinned});
    for (std::int64_t epoch : {0, 3}) {
      plain.start_epoch(epoch);
      pinned_loader.start_epoch(epoch);
      int batches = 0;
      while (auto a = plain.next()) {
        auto b = pinned_loader.next();
        REQUIRE(b.has_value());
        ++batches;
        REQUIRE(a->inputs.sizes() == b->inputs.sizes());
        REQUIRE(a->targets.sizes() == b->targets.sizes());
        CHECK(std::equal(a->inputs.data<float>(), a->inputs.data<float>() + a->inputs.numel(),
                         b->inputs.data<float>()));
        CHECK(std::equal(a->targets.data<std::int64_t>(),
                         a->targets.data<std::int64_t>() + a->targets.numel(),
                         b->targets.data<std::int64_t>()));
      }
      CHECK_FALSE(pinned_loader.next().has_value());
      CHECK(batches == 5);
    }
    // Two tensors per batch, 5 batches, 2 epochs: all of them from the batch allocator.
    CHECK(pinned.blocks == 2 * 5 * 2);
  }
}

TEST_CASE("DataLoader pin_memory needs the CUDA backend and says so", "[data][loader][pinned]") {
  if (cuda_available()) {
    SUCCEED("CUDA is available here; the refusal is for machines without it");
    return;
  }
  CHECK_THROWS_WITH(DataLoader(counting_dataset(4), {.batch = 2, .pin_memory = true}),
                    Catch::Contains("pin_memory") && Catch::Contains("CUDA is not available"));
}
