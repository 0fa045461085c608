// SPDX-License-Identifier: Apache-2.0
#pragma once
// The configuration handshake of data-parallel training (Note [Configuration handshake]).
//
// Note [Configuration handshake]
// Data parallelism assumes that every rank runs the same configuration. When they do not, the
// job used to crash inside Open MPI (different batch sizes, epoch counts, bucket caps or dataset
// sizes issue collectives of different sizes or counts: SIGSEGV, SIGABRT, "munmap_chunk():
// invalid pointer"), hang until the collective timeout (different models), or finish silently
// with a mixed model (different optimizers or seeds, --resume on one rank only). So before its
// first collective every rank contributes one fixed-size record: kHandshakeSlots slots of 64
// bytes, each holding a 64-bit hash of one field's full value and the first 55 bytes of its
// printable form; slot 0 fingerprints the list of field names itself (a rank of another anvil
// build is told apart from a rank with other options). One all-gather of 1.5 KiB per rank gives
// every rank every record, and every rank computes the same verdict from them: the first field,
// in the caller's order, on which the lowest-numbered rank differs from rank 0. On a mismatch
// every rank throws RanksDisagree with the same message, "ranks disagree on batch: rank 0 has
// 64, rank 1 has 32": the tool prints it once (rank 0) and every rank leaves in order. The
// size is fixed, so ranks that disagree on anything still issue the same collective.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/distributed/communicator.h"

namespace anvil::dist {

inline constexpr int kHandshakeSlots = 24;  // slot 0 + up to 23 fields

struct HandshakeField {
  std::string name;   // "batch", as the message names it
  std::string value;  // printable, "64"; only its first 55 bytes travel
  std::string key;    // what must agree, when longer than `value` (e.g. every shape); "" = value
};

// Thrown on every rank, with the same message, when the ranks' fields differ: a configuration
// error that every rank knows about at the same point, so no rank needs to abort the others.
class RanksDisagree : public ConfigError {
 public:
  RanksDisagree(const std::string& message, int rank) : ConfigError(message), rank_(rank) {}
  int rank() const { return rank_; }  // the rank that threw it (rank 0 prints it)

 private:
  int rank_;
};

// Checks that every rank of `comm` has the same fields (names, order and values); throws
// RanksDisagree naming the first that differs and its values on rank 0 and on the first rank
// that differs. One all-gather; nothing on one rank. At most kHandshakeSlots - 1 fields.
void agree_on_configuration(Communicator& comm, const std::vector<HandshakeField>& fields);

// 64-bit FNV-1a of `n` bytes, continuing from `h`.
inline constexpr std::uint64_t kFnvOffset = 14695981039346656037ull;
std::uint64_t fnv1a64(const void* data, std::size_t n, std::uint64_t h = kFnvOffset);
// A fingerprint of a file's whole content (FNV-1a over 64-bit words, then the tail bytes):
// equal files, equal fingerprints. Throws anvil::Error naming the file when it cannot be read.
std::uint64_t file_fingerprint(const std::string& path);
// The same over a tensor's bytes (contiguous host tensors; others are copied first).
std::uint64_t tensor_fingerprint(const Tensor& t, std::uint64_t h = kFnvOffset);

}  // namespace anvil::dist
