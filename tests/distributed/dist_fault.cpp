// SPDX-License-Identifier: Apache-2.0
// A 2-rank job whose rank 1 fails in the middle of a data-parallel step, for test_dist_fault.sh:
// `dist_fault kill` (rank 1 SIGKILLs itself before its 4th all-reduce) or `dist_fault stall`
// (rank 1 sleeps instead). Rank 0 keeps reducing; it must end with a clear error, not hang.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>

#include "engine/distributed/communicator.h"

int main(int argc, char** argv) {
  const bool kill_mode = argc > 1 && std::strcmp(argv[1], "kill") == 0;
  try {
    auto comm = anvil::dist::create_communicator("mpi");
    anvil::Tensor g = anvil::Tensor::ones({1 << 20});
    for (int step = 0; step < 10; ++step) {
      if (comm->rank() == 1 && step == 3) {
        std::fprintf(stderr, "dist_fault: rank 1 %s at step 3\n", kill_mode ? "killed" : "stalls");
        if (kill_mode) raise(SIGKILL);
        sleep(120);
      }
      comm->all_reduce(g, anvil::dist::ReduceOp::average);
    }
    std::printf("dist_fault: rank %d finished (unexpected)\n", comm->rank());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_fault: error: %s\n", e.what());
    return 1;
  }
}
