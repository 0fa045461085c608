// SPDX-License-Identifier: Apache-2.0
#pragma once
// Variant selection as one pure function, and the policy knobs that feed it.
//
// Note [Variant selection]
// Every op has an ordered table of variants (engine/dispatch/variant_table.h). For a problem,
// each variant answers supports(problem) -> {ok, reason}. Then, in this order:
//   1. a forced name (ForceVariant guard > set_forced_variant()/CLI flag > ANVIL_VARIANT) wins if
//      it supports the problem, else it is an error (never a silent fallback);
//   2. with autotune on, the cached winner for this problem's key, once it has been timed;
//   3. the table's heuristic pick, when it has one and that variant supports the problem;
//   4. the first supporting variant in the table's order (Note [Variant order]); `ref` is last
//      and supports everything it can compute, so it is the fallback.
// When nothing supports the problem, the error lists every variant with its reason.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace anvil {

struct Support {
  bool ok = true;
  std::string reason;  // why not, when !ok
  static Support yes() { return {true, {}}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
};

// One variant as selection sees it.
struct Candidate {
  std::string name;
  Support support;
};

struct SelectionPolicy {
  std::string forced;          // "" = not forced
  std::string tuned_winner;    // autotune result for this problem ("" = none yet)
  std::string heuristic_pick;  // the table heuristic's choice ("" = none)
  // With autotune on: what its trials timed and picked (Note [Autotune trials]), or why it did
  // not decide: the op does not autotune (Note [Ops that do not autotune]), or the call passed no
  // trial. "" when autotune is off.
  std::string autotune_note;
};

// Index into `candidates` chosen by the rules of Note [Variant selection] (steps 1, 2, 3, 4).
// Throws anvil::Error naming `op`, the problem and every candidate's reason when none fits,
// or when a forced name is unknown or does not support the problem.
std::size_t select_variant(const std::string& op, const std::string& problem,
                           const std::vector<Candidate>& candidates, const SelectionPolicy& policy);

// ---- forcing --------------------------------------------------------------------------------
// The forced variant name for `op` ("" when none), looking at the innermost ForceVariant guard
// of this thread, then the process-wide setting (CLI flags), then ANVIL_VARIANT.
std::string forced_variant(const std::string& op);
// Process-wide forcing, as a CLI flag sets it; name "" clears it.
void set_forced_variant(const std::string& op, const std::string& name);
// Parses "op=name[,op=name...]" (the ANVIL_VARIANT / --variant syntax) into a map; a malformed
// spec throws anvil::ConfigError.
std::map<std::string, std::string> parse_variant_spec(const std::string& spec);
// Throws anvil::ConfigError when ANVIL_VARIANT or set_forced_variant() forces a variant for an op
// that has no variant table (a typo such as "gem=ref"), naming the op and listing the ops;
// selection only ever asks for the ops it dispatches, so such a forcing would otherwise be
// ignored without a word. Variant names are checked when the op runs (select_variant): CUDA
// variants join their tables only when the GPU backend loads. Registers the built-in kernels.
void check_forced_variant_ops();

// RAII: forces `name` for `op` on this thread while alive.
class ForceVariant {
 public:
  ForceVariant(std::string op, std::string name);
  ~ForceVariant();
  ForceVariant(const ForceVariant&) = delete;
  ForceVariant& operator=(const ForceVariant&) = delete;

 private:
  std::string op_;
  std::optional<std::string> previous_;
};

// ---- the dispatch log -------------------------------------------------------------------------
// Note [Dispatch log]
// ANVIL_VERBOSE=dispatch (read once, engine/core/config.h) prints one line per selection to
// stderr, as describe_selection() writes it:
//   anvil dispatch: op=gemm problem=<repr> chosen=cpu.onednn by=order declined: cpu.eigen
//   (supported, but cpu.onednn comes first in the order); ref (supported, but ...)
// (one line in reality). `by` is the rule of Note [Variant selection] that decided: forced,
// autotune, heuristic or order. A decision by autotune ends with `autotune: winner <name> (seed
// <s>): <variant> <time> us, ...`, what its trials timed (Note [Autotune trials]); with autotune
// on but not deciding, the line ends with `autotune: <why>` (Note [Ops that do not autotune]).
// Every other variant is listed with its reason: its own supports() answer, or why a supporting
// variant was passed over. A training loop repeats the same problems every step, so
// ANVIL_VERBOSE=dispatch prints each distinct decision (op, problem key, chosen variant, rule)
// once per process; ANVIL_VERBOSE=dispatch_all prints every call. A selection that fails prints
// nothing: its error lists every variant's reason.

// 0 = off, 1 = each distinct decision once, 2 = every selection (ANVIL_VERBOSE).
int dispatch_verbosity();
inline bool dispatch_verbose() { return dispatch_verbosity() != 0; }
// The log line for one decision (no newline): `chosen` indexes `candidates`, which were
// decided under `policy` (Note [Dispatch log]).
std::string describe_selection(const std::string& op, const std::string& problem,
                               const std::vector<Candidate>& candidates, std::size_t chosen,
                               const SelectionPolicy& policy);
// Prints describe_selection() to stderr, once per distinct (op, key, decision) unless
// ANVIL_VERBOSE=dispatch_all.
void report_selection(const std::string& op, const std::string& key, const std::string& problem,
                      const std::vector<Candidate>& candidates, std::size_t chosen,
                      const SelectionPolicy& policy);

// ---- the selection memo's context -------------------------------------------------------------
// Everything besides the problem, the table and forcing that a decision may depend on, as one
// word (Note [Selection memo]): whether autotune runs (it is on and the caller passed a trial;
// a decision made without trials must not stand in for a tuned one), and the OpenMP state that
// heuristics read (openmp_context(), engine/core/config.h).
unsigned selection_context(bool autotunes);
// Memo hits over all tables since the process started (diagnostics and tests).
std::uint64_t selection_memo_hits();
void count_selection_memo_hit();
// Off by default. When on, every memo hit is checked against the full decision
// (select_uncached), and a difference throws anvil::Error naming both variants: the tests run
// whole model steps this way (tests/test_selection_memo.cpp).
void set_selection_memo_check(bool on);
bool selection_memo_check();

// ---- autotune -------------------------------------------------------------------------------
// Off by default; on with ANVIL_AUTOTUNE=1 or set_autotune(true).
bool autotune_enabled();
void set_autotune(bool on);

}  // namespace anvil
