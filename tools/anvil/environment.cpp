// SPDX-License-Identifier: Apache-2.0
// check_environment (tools/anvil/environment.h): one table of every environment variable
// anvil reads and the values it accepts.
#include "tools/anvil/environment.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "engine/core/parse_number.h"

namespace anvil::tools {
namespace {

struct Choice {  // a variable whose value is one of `values` (or, with `list`, a comma list of
                 // them)
  const char* name;
  std::vector<std::string> values;
  bool list = false;
};
struct Range {  // a variable whose value is a number in [min, max]
  const char* name;
  double min, max;
  bool integer;
};

// Paths (ANVIL_CUDA_LIBRARY, ANVIL_MPI_LIBRARY, ANVIL_NCCL_LIBRARY, ANVIL_FASHION_MNIST_DIR,
// ANVIL_PTB_DIR) are checked where they are opened, with their names.
const std::vector<Choice> kChoices = {
    {"ANVIL_AUTOTUNE", {"0", "1"}},
    {"ANVIL_CPU_HUGE_PAGES", {"0", "1"}},
    {"ANVIL_CPU_CACHE_BOUND", {"0", "1"}},
    {"ANVIL_CUDNN_LOG", {"0", "1"}},
    {"ANVIL_MPI_YIELD", {"0", "1"}},
    {"ANVIL_MPI_PROGRESS", {"hooks", "thread"}},
    {"ANVIL_ALLREDUCE", {"libnbc", "chunked", "ring", "auto"}},
    {"ANVIL_VERBOSE", {"dispatch", "dispatch_all", "host_profile"}, true},
};
const std::vector<Range> kRanges = {
    {"ANVIL_DIST_TIMEOUT", 1e-3, 86400.0, false},   // seconds, up to a day
    {"ANVIL_MPI_PROGRESS_US", 1, 100000, true},     // the poll interval, microseconds
    {"ANVIL_ALLREDUCE_CHUNK_KIB", 1, 65536, true},  // chunked/ring all-reduce chunk
    {"ANVIL_CUDNN_WORKSPACE_MB", 0, 1 << 24, true},
    {"ANVIL_AUTOTUNE_SEED", 0, 9223372036854775807.0, true},  // Note [Autotune trials]
};

std::string joined(const std::vector<std::string>& values) {
  std::string s;
  for (const auto& v : values) s += (s.empty() ? "" : ", ") + v;
  return s;
}

void check_choice(const Choice& c, const std::string& value) {
  std::vector<std::string> items;
  if (c.list) {
    std::size_t pos = 0;
    while (pos <= value.size()) {
      const std::size_t end = std::min(value.find(',', pos), value.size());
      items.push_back(value.substr(pos, end - pos));
      pos = end + 1;
    }
  } else {
    items.push_back(value);
  }
  for (const auto& item : items) {
    if (c.list && item.empty()) continue;  // "dispatch," as the library reads it
    bool known = false;
    for (const auto& v : c.values) known = known || v == item;
    ANVIL_CHECK_CONFIG(known, c.name, "expected ", c.list ? "a comma-separated list of " : "",
                       joined(c.values), ", got '", value, "'");
  }
}

void check_range(const Range& r, const std::string& value) {
  const auto v = parse_number<double>(value);
  const bool ok = v && std::isfinite(*v) && *v >= r.min && *v <= r.max &&
                  (!r.integer || parse_number<long long>(value));
  ANVIL_CHECK_CONFIG(ok, r.name, "expected ", r.integer ? "an integer" : "a number", " in [", r.min,
                     ", ", r.max, "], got '", value, "'");
}

}  // namespace

void check_environment(bool threads_chosen) {
  for (const auto& c : kChoices)
    if (const std::string v = env_or_empty(c.name); !v.empty()) check_choice(c, v);
  for (const auto& r : kRanges)
    if (const std::string v = env_or_empty(r.name); !v.empty()) check_range(r, v);
  if (!threads_chosen) (void)get_num_threads();  // ANVIL_NUM_THREADS, OMP_NUM_THREADS
  check_forced_variant_ops();                    // ANVIL_VARIANT
}

}  // namespace anvil::tools
