// SPDX-License-Identifier: Apache-2.0
// DataLoader as a range, `for (auto& batch : loader)`: one epoch per loop, the batches of
// next() in the same order, the epoch count advancing, start_epoch(e, skip) honoured by the
// loop that follows it, and a loop left early leaving nothing behind.
#include <catch2/catch.hpp>

#include <algorithm>
#include <iterator>
#include <vector>

#include "data/loader.h"
#include "helpers/counting_dataset.h"

using namespace anvil;
using namespace anvil::data;

namespace {

// Inputs [n, 2] with row i = (i, i); targets [n] = i.
TensorDataset counting_dataset(std::int64_t n) { return test::counting_dataset(n, 2); }

void append_targets(const LoadedBatch& b, std::vector<std::int64_t>& out) {
  const auto* t = b.targets.data<std::int64_t>();
  for (std::int64_t i = 0; i < b.targets.numel(); ++i) {
    REQUIRE(b.inputs.data<float>()[2 * i] == static_cast<float>(t[i]));
    out.push_back(t[i]);
  }
}

std::vector<std::int64_t> next_epoch_targets(DataLoader& loader, std::int64_t epoch,
                                             std::int64_t skip = 0) {
  loader.start_epoch(epoch, skip);
  std::vector<std::int64_t> out;
  while (auto b = loader.next()) append_targets(*b, out);
  return out;
}

std::vector<std::int64_t> range_targets(DataLoader& loader, std::int64_t* batches = nullptr) {
  std::vector<std::int64_t> out;
  std::int64_t n = 0;
  for (auto& batch : loader) {
    append_targets(batch, out);
    ++n;
  }
  if (batches) *batches = n;
  return out;
}

}  // namespace

TEST_CASE("for (auto& batch : loader) runs epoch 0, 1, 2, ... as next() does",
          "[data][loader][range]") {
  const auto ds = counting_dataset(23);
  for (bool background : {false, true}) {
    const LoaderOptions opt{.batch = 5, .shuffle = true, .seed = 3, .background = background};
    DataLoader reference(ds, opt);
    DataLoader ranged(ds, opt);
    for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
      std::int64_t batches = 0;
      REQUIRE(range_targets(ranged, &batches) == next_epoch_targets(reference, epoch));
      REQUIRE(batches == 5);
      REQUIRE(ranged.epoch() == epoch);
    }
  }
}

TEST_CASE("a range-for after start_epoch(e, skip) runs that epoch from there",
          "[data][loader][range]") {
  const auto ds = counting_dataset(30);
  const LoaderOptions opt{.batch = 4, .shuffle = true, .seed = 11};
  DataLoader reference(ds, opt);
  DataLoader ranged(ds, opt);
  ranged.start_epoch(4, 2);  // resuming inside epoch 4, as from a checkpoint
  REQUIRE(range_targets(ranged) == next_epoch_targets(reference, 4, 2));
  REQUIRE(ranged.epoch() == 4);
  REQUIRE(range_targets(ranged) == next_epoch_targets(reference, 5));  // then on to epoch 5
}

TEST_CASE("a range-for left early stops its epoch, and the next loop starts a new one",
          "[data][loader][range]") {
  const auto ds = counting_dataset(40);
  const LoaderOptions opt{.batch = 4, .shuffle = true, .seed = 2, .background = true};
  DataLoader reference(ds, opt);
  DataLoader ranged(ds, opt);
  for (auto& batch : ranged) {
    REQUIRE(batch.targets.numel() == 4);
    break;  // the producer thread is stopped by the next start_epoch (or the destructor)
  }
  REQUIRE(ranged.epoch() == 0);
  REQUIRE(range_targets(ranged) == next_epoch_targets(reference, 1));
}

TEST_CASE("the loader's iterator is an input iterator that ends at the epoch's end",
          "[data][loader][range]") {
  DataLoader loader(counting_dataset(6), {.batch = 4, .shuffle = false, .background = false});
  auto it = loader.begin();
  REQUIRE(it != loader.end());
  REQUIRE(it->targets.numel() == 4);
  ++it;
  REQUIRE((*it).targets.numel() == 2);  // the last, smaller batch (drop_last off)
  REQUIRE(std::next(it) == loader.end());
  static_assert(std::input_iterator<DataLoader::Iterator>);
}
