// SPDX-License-Identifier: Apache-2.0
// Host-side GPU placement of the "nccl" communicator's ranks (Note [One GPU per rank] in
// nccl_placement.h): FNV-1a ids, the node-local rank, and the duplicate-GPU refusal.
#include "engine/distributed/nccl_placement.h"

#include <unistd.h>

#include "engine/core/error.h"
#include "engine/distributed/communicator.h"
#include "engine/distributed/handshake.h"

namespace anvil::dist {

std::int64_t placement_hash(const std::string& text) {
  return static_cast<std::int64_t>(fnv1a64(text.data(), text.size()));
}

std::vector<std::int64_t> gather_host_ids(Communicator& comm) {
  char host[256] = {0};
  ANVIL_CHECK(gethostname(host, sizeof host - 1) == 0, "gather_host_ids", "gethostname failed");
  const Tensor mine = Tensor::from_vector(std::vector<std::int64_t>{placement_hash(host)}, {1});
  const Tensor all = comm.all_gather(mine);
  return {all.data<std::int64_t>(), all.data<std::int64_t>() + comm.size()};
}

int node_local_rank(const std::vector<std::int64_t>& hosts, int rank) {
  ANVIL_CHECK(rank >= 0 && static_cast<std::size_t>(rank) < hosts.size(), "node_local_rank",
              "rank ", rank, " outside [0, ", hosts.size(), ")");
  int local = 0;
  for (int r = 0; r < rank; ++r) local += hosts[static_cast<std::size_t>(r)] == hosts[rank];
  return local;
}

std::string duplicate_gpu_message(const std::vector<std::int64_t>& hosts,
                                  const std::vector<std::int64_t>& gpus, const std::string& bus_id,
                                  int visible) {
  ANVIL_CHECK(hosts.size() == gpus.size(), "duplicate_gpu_message", hosts.size(), " host ids but ",
              gpus.size(), " GPU ids");
  for (std::size_t a = 0; a < hosts.size(); ++a)
    for (std::size_t b = a + 1; b < hosts.size(); ++b)
      if (hosts[a] == hosts[b] && gpus[a] == gpus[b])
        return detail::str_cat(
            "ranks ", a, " and ", b, " are on the same host and the same GPU (", visible,
            " GPU(s) visible per process; this rank's GPU: PCI ", bus_id,
            "): NCCL needs one GPU per rank (it would fail with "
            "\"Duplicate GPU detected\"); start at most as many ranks per node as it has GPUs, "
            "or use --dist mpi for CPU training");
  return "";
}

}  // namespace anvil::dist
