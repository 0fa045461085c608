// SPDX-License-Identifier: Apache-2.0
#pragma once
// How autotune runs its trials and picks the winner from their times (Note [Autotune trials]).
//
// Note [Autotune trials]
// Autotune (Note [Variant selection], step 2) times every supporting non-ref variant of a
// problem with time_trial() (Note [Trial timer]) and caches the winner. Two things used to make
// its choice depend on more than the variants' speed:
//   - order: the first variant timed paid the cold caches and the page faults, and a variant
//     timed right after a memory-heavy one inherited its evicted caches;
//   - near-ties: two variants within the run-to-run noise swapped places from run to run.
// So the trials run in kAutotuneRounds rounds: round 0 warms every variant up (primitive
// creation, page faults) and is not counted; in each later round every variant runs once, in an
// order drawn afresh from the trial seed, the problem's key and the round; a variant's time is
// its fastest counted round. The winner is the first variant in the table's order whose time is
// within kAutotuneTie of the fastest: the declared order already says which variant to prefer,
// and a smaller difference is below the noise of one trial on a shared host.
// The trial seed is ANVIL_AUTOTUNE_SEED (default 0) or set_autotune_seed(). With a fixed seed,
// the trials of a problem run in the same order in every process, and the choice changes only
// when the measured times cross the tie band (tests/test_autotune_trials.cpp). What was timed
// is kept with the winner: the dispatch log prints it and autotune_records() returns it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace anvil {

// Rounds of trials per problem: one warm-up round and two counted ones.
inline constexpr int kAutotuneRounds = 3;
// A variant earlier in the table's order wins over a faster one within this fraction.
inline constexpr double kAutotuneTie = 0.02;

// The trial seed: ANVIL_AUTOTUNE_SEED (an integer in [0, 2^63 - 1]; another value throws
// anvil::Error naming it) until set_autotune_seed() sets it. Changing it does not clear the
// winners already cached (clear_autotune_cache() does).
std::uint64_t autotune_seed();
void set_autotune_seed(std::uint64_t seed);

// The order in which round `round` runs n trials: a permutation of 0..n-1, a pure function of
// (seed, key, round).
std::vector<std::size_t> trial_order(std::size_t n, std::uint64_t seed, const std::string& key,
                                     int round);

// The winner's index among `seconds` (one per candidate in the table's order; a negative entry
// was not timed): the first within `tie` of the fastest. Requires at least one timed entry.
std::size_t autotune_pick(const std::vector<double>& seconds, double tie = kAutotuneTie);

// What autotune timed for one problem, kept with its winner.
struct AutotuneRecord {
  std::string problem;  // the problem's repr()
  std::string winner;
  std::uint64_t seed = 0;             // the trial seed it ran with
  std::vector<std::string> order;     // every trial's variant, in the order they ran
  std::vector<std::string> variants;  // the timed variants, in the table's order
  std::vector<double> seconds;        // each one's fastest counted round
};
// "winner X (seed S): a 1.2 us, b 1.5 us" for the dispatch log.
std::string describe_trials(const AutotuneRecord& r);

}  // namespace anvil
