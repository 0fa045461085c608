// SPDX-License-Identifier: Apache-2.0
#pragma once
// Per-rank random streams for data-parallel training: every rank reseeds the generators its
// model carries (Dropout layers' own ones) and the default generator, at the start of each
// epoch, from (seed, rank, epoch, stream), so that ranks drop different units and a resumed run
// draws the same masks as an uninterrupted one (Note [Dropout under data parallelism]).
#include <cstdint>

#include "engine/nn/module.h"

namespace anvil::dist {

// Note [Dropout under data parallelism]
// One process draws every dropout mask of a global batch from one stream. Under data
// parallelism the ranks build the same model from the same seed, so without care every rank
// would hold the same generator states and drop the same units for different samples: a
// correlated, and therefore different, regularisation. Instead, at the start of epoch e, rank r
// of a run of seed s sets generator k of the model (the k-th entry of named_extra_state() that
// is a generator, i.e. Dropout layer k's own stream) to mt19937_64(mix(s, r, e, k + 1)) and the
// default generator to mt19937_64(mix(s, r, e, 0)), mix being a chain of splitmix64 finalisers.
// So:
// - the ranks' streams differ (different masks for their different samples), deterministically;
// - a run is still bitwise reproducible from run to run, and a run resumed at an epoch boundary
//   draws exactly the masks of the uninterrupted run: the streams of epoch e depend on
//   (s, r, e) only, never on the generator state a checkpoint stored (rank 0's);
// - the masks are not the ones one process would draw for the global batch, so a model with
//   dropout is a statistically equivalent computation on 1 and N ranks, not the same one (the
//   1- vs 2-rank accuracy check has a statistical tolerance). On one rank `anvil train` does not
//   call this: the single-process streams stay those of Note [Resuming a run].
void seed_rank_streams(nn::Module& net, std::uint64_t seed, int rank, std::int64_t epoch);

// The seed mix(seed, rank, epoch, stream) of the note above.
std::uint64_t rank_stream_seed(std::uint64_t seed, int rank, std::int64_t epoch,
                               std::uint64_t stream);

}  // namespace anvil::dist
