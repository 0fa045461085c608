// SPDX-License-Identifier: Apache-2.0
#pragma once
// Every run-time knob of anvil, read in one place and printable into benchmark contexts.
//
// Environment variables (read once, on first use):
//   ANVIL_NUM_THREADS  threads for OpenMP, Eigen and oneDNN (default: OpenMP's default, i.e.
//                      OMP_NUM_THREADS or the hardware threads); at most max_threads()
//   ANVIL_VARIANT      forced variants, "op=name[,op=name...]" (e.g. "gemm=cpu.blocked")
//   ANVIL_AUTOTUNE     1 to time the candidate variants once per problem and keep the fastest
//   ANVIL_AUTOTUNE_SEED the order of autotune's trials, an integer (Note [Autotune trials])
//   ANVIL_CUDA_LIBRARY path of libanvil_cuda.so when it is not next to libanvil
//   ANVIL_CPU_HUGE_PAGES 0 to keep large CPU blocks off transparent huge pages (allocator.h)
//   ANVIL_CPU_CACHE_BOUND 0 to let the CPU block cache grow past the live high-water mark
//   ANVIL_VERBOSE      comma-separated topics to log to stderr: `dispatch` (each distinct variant
//                      selection once) or `dispatch_all` (every one), Note [Dispatch log];
//                      `host_profile` (host time per variant), Note [Host profile]
#include <functional>
#include <map>
#include <string>

namespace anvil {

// Note [Thread limit]
// A thread count is at most max_threads(): kThreadsPerHardwareThread x the hardware threads,
// and at least kMinThreadLimit so that small machines can still test oversubscription. Far more
// threads than cores only slows a run down, and libgomp crashes (SIGSEGV) when it cannot create
// the threads of a huge team (OMP_NUM_THREADS=100000), so every way of choosing the count
// (set_num_threads, ANVIL_NUM_THREADS, OpenMP's inherited default) is held to the same limit
// and refused with anvil::ConfigError naming the knob and the value.
inline constexpr int kThreadsPerHardwareThread = 4;
inline constexpr int kMinThreadLimit = 16;
int max_threads();
// "4 x the 2 hardware threads, at least 16": how max_threads() was reached, for messages.
std::string thread_limit_reason();

// Sets the thread count of OpenMP and of every library registered through
// add_thread_setter() (Eigen, oneDNN), so that one knob controls all of them. Throws
// anvil::ConfigError outside [1, max_threads()].
void set_num_threads(int n);
// The count set, else the default (ANVIL_NUM_THREADS or OpenMP's); throws anvil::ConfigError
// when the default exceeds max_threads().
int get_num_threads();
// The OpenMP state that variant heuristics read, as one number: omp_get_max_threads() * 2, plus 1
// inside a parallel region (part of the selection memo's key, engine/dispatch/variant_table.h).
unsigned openmp_context();
// Kernel libraries call this at registration to follow set_num_threads().
void add_thread_setter(std::function<void(int)> setter);

// Kernel libraries record their version at registration ("oneDNN" -> "2.6.3"), so that
// benchmark contexts and `anvil info` say what actually ran.
void add_library_version(const std::string& library, const std::string& version);
std::map<std::string, std::string> library_versions();

// All knobs as name -> value text (threads, forced variants, autotune, library versions).
std::map<std::string, std::string> config_summary();

// True when ANVIL_VERBOSE (read once) names `topic` among its comma-separated topics.
bool verbose_enabled(const std::string& topic);

// Reads an environment variable ("" when unset).
std::string env_or_empty(const char* name);

}  // namespace anvil
