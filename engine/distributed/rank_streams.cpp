// SPDX-License-Identifier: Apache-2.0
// Per-rank random streams of data-parallel training (Note [Dropout under data parallelism] in
// rank_streams.h): splitmix64-mixed seeds for the model's own generators and the default one.
#include "engine/distributed/rank_streams.h"

#include <map>
#include <string>

#include "engine/core/error.h"
#include "engine/core/random.h"

namespace anvil::dist {

namespace {
std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
bool is_generator_entry(const std::string& key) {
  const std::string suffix = "generator";
  return key.size() >= suffix.size() &&
         key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

std::uint64_t rank_stream_seed(std::uint64_t seed, int rank, std::int64_t epoch,
                               std::uint64_t stream) {
  std::uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ static_cast<std::uint64_t>(rank));
  h = splitmix64(h ^ static_cast<std::uint64_t>(epoch));
  return splitmix64(h ^ stream);
}

void seed_rank_streams(nn::Module& net, std::uint64_t seed, int rank, std::int64_t epoch) {
  ANVIL_CHECK(rank >= 0 && epoch >= 0, "seed_rank_streams", "rank ", rank, " and epoch ", epoch,
              " must be >= 0");
  std::map<std::string, std::string> state;
  std::uint64_t k = 0;
  for (const auto& [key, value] : net.named_extra_state()) {
    if (!is_generator_entry(key)) {
      state.emplace(key, value);  // not a random stream: left as it is
      continue;
    }
    state.emplace(key, Generator(rank_stream_seed(seed, rank, epoch, ++k)).state());
  }
  if (!state.empty()) net.load_extra_state(state);
  manual_seed(rank_stream_seed(seed, rank, epoch, 0));
}

}  // namespace anvil::dist
