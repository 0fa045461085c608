// SPDX-License-Identifier: Apache-2.0
#pragma once
// Which GPU each rank of the "nccl" communicator uses, decided on the host before NCCL starts
// (Note [One GPU per rank]): the node-local rank from the ranks' host ids, and the refusal of
// two ranks on one GPU, which NCCL itself reports only from inside ncclCommInitRank.
//
// Note [One GPU per rank]
// NCCL needs every rank of a communicator on its own GPU: ncclCommInitRank compares the ranks'
// (host hash, PCI bus id) pairs and fails with ncclInvalidUsage ("Duplicate GPU detected",
// printed only with NCCL_DEBUG=WARN) when two match. create_communicator("nccl") therefore
// gathers every rank's host id over the bootstrap communicator, takes device = node-local rank
// modulo the GPUs this process sees (so both "all GPUs visible" and "CUDA_VISIBLE_DEVICES per
// rank" launches work), gathers the chosen GPUs' PCI bus ids and, when two ranks of one host
// share a GPU, throws on every rank, naming both, before ncclCommInitRank or any training work.
#include <cstdint>
#include <string>
#include <vector>

namespace anvil::dist {

class Communicator;

// 64-bit FNV-1a of `text` (host names, PCI bus ids) as a signed value for an i64 tensor.
std::int64_t placement_hash(const std::string& text);

// Every rank's host id (placement_hash of its host name), gathered over `comm`, rank by rank:
// what node_local_rank() reads. Used by nccl and by the host-staged collectives.
std::vector<std::int64_t> gather_host_ids(Communicator& comm);

// The rank's index among the ranks with the same host id (hosts[r] for rank r).
int node_local_rank(const std::vector<std::int64_t>& hosts, int rank);

// "" when no two ranks share a (host, gpu) pair; else the refusal message naming the first two
// ranks that do, `bus_id` (this rank's GPU, for the message) and `visible` GPUs per process.
std::string duplicate_gpu_message(const std::vector<std::int64_t>& hosts,
                                  const std::vector<std::int64_t>& gpus, const std::string& bus_id,
                                  int visible);

}  // namespace anvil::dist
