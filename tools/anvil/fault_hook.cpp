// SPDX-License-Identifier: Apache-2.0
// ANVIL_TEST_FAULT (Note [Test fault hook] in tools/anvil/fault_hook.h).
#include "tools/anvil/fault_hook.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "engine/core/config.h"
#include "engine/core/error.h"
#include "engine/core/parse_number.h"

namespace anvil::tools {

FaultHook FaultHook::from_env(int rank) {
  constexpr const char* kName = "ANVIL_TEST_FAULT";
  const std::string v = env_or_empty(kName);
  FaultHook hook;
  if (v.empty()) return hook;
  // "KIND@RANK:STEP"; -1 stands for a part that is missing or not a number.
  const std::size_t at = v.find('@'), colon = v.find(':', at == std::string::npos ? 0 : at);
  const std::string kind = v.substr(0, at);
  const bool split = at != std::string::npos && colon != std::string::npos;
  const int r = split ? parse_number<int>(v.substr(at + 1, colon - at - 1)).value_or(-1) : -1;
  const std::int64_t step =
      split ? parse_number<std::int64_t>(v.substr(colon + 1)).value_or(-1) : -1;
  ANVIL_CHECK_CONFIG((kind == "error" || kind == "stall") && r >= 0 && step >= 1, kName,
                     "expected error@RANK:STEP or stall@RANK:STEP (STEP >= 1), got '", v, "'");
  if (r != rank) return hook;
  hook.kind_ = kind;
  hook.rank_ = r;
  hook.step_ = step;
  return hook;
}

void FaultHook::fire() const {
  if (kind_ == "stall") {
    // The pid lets the test check that the job's end took this process with it.
    std::fprintf(stderr, "anvil: test fault: rank %d (pid %d) stalls at step %lld\n", rank_,
                 static_cast<int>(getpid()), static_cast<long long>(step_));
    std::fflush(stderr);
    raise(SIGSTOP);
    return;
  }
  fail("anvil train", "test fault (ANVIL_TEST_FAULT) on rank ", rank_, " at step ", step_);
}

}  // namespace anvil::tools
