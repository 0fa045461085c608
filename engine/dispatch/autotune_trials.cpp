// SPDX-License-Identifier: Apache-2.0
// Autotune's trial order and pick (engine/dispatch/autotune_trials.h, Note [Autotune trials]).
#include "engine/dispatch/autotune_trials.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <numeric>

#include "engine/core/config.h"
#include "engine/core/error.h"
#include "engine/core/parse_number.h"

namespace anvil {
namespace {

std::uint64_t seed_from_environment() {
  const std::string v = env_or_empty("ANVIL_AUTOTUNE_SEED");
  if (v.empty()) return 0;
  const auto seed = parse_number<long long>(v);
  ANVIL_CHECK_CONFIG(seed && *seed >= 0, "ANVIL_AUTOTUNE_SEED",
                     "expected an integer in [0, 2^63 - 1], got '", v, "'");
  return static_cast<std::uint64_t>(*seed);
}

// Atomic: set_autotune_seed() may run while other threads select. Read from the environment on
// first use, so that a bad value throws from the call that needs it, not at load time.
std::atomic<std::uint64_t>& seed_slot() {
  static std::atomic<std::uint64_t> seed{seed_from_environment()};
  return seed;
}

// splitmix64: a small, well-mixed generator whose output is the same on every platform (the
// standard library's distributions are not).
std::uint64_t mix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

}  // namespace

std::uint64_t autotune_seed() { return seed_slot().load(std::memory_order_relaxed); }
void set_autotune_seed(std::uint64_t seed) { seed_slot().store(seed, std::memory_order_relaxed); }

std::vector<std::size_t> trial_order(std::size_t n, std::uint64_t seed, const std::string& key,
                                     int round) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::uint64_t state = seed ^ fnv1a(key) ^ (static_cast<std::uint64_t>(round) << 56);
  for (std::size_t i = n; i > 1; --i)  // Fisher-Yates, from the back
    std::swap(order[i - 1], order[mix(state) % i]);
  return order;
}

std::size_t autotune_pick(const std::vector<double>& seconds, double tie) {
  double fastest = -1;
  for (const double s : seconds)
    if (s >= 0 && (fastest < 0 || s < fastest)) fastest = s;
  ANVIL_CHECK(fastest >= 0, "autotune", "no variant was timed");
  for (std::size_t i = 0; i < seconds.size(); ++i)
    if (seconds[i] >= 0 && seconds[i] <= fastest * (1 + tie)) return i;
  return seconds.size();  // unreachable: the fastest itself is within the band
}

std::string describe_trials(const AutotuneRecord& r) {
  std::string s = "winner " + r.winner + " (seed " + std::to_string(r.seed) + "):";
  for (std::size_t i = 0; i < r.variants.size(); ++i) {
    char us[32];
    std::snprintf(us, sizeof us, "%.3g", r.seconds[i] * 1e6);
    s += (i ? ", " : " ") + r.variants[i] + ' ' + us + " us";
  }
  return s;
}

}  // namespace anvil
