#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A rank that dies (SIGKILL) or stalls in the middle of a step ends the 2-rank job with a
# non-zero status and a clear message within a bounded time (Note [Collective timeout]):
# killed -> mpirun names the rank and the signal; stalled -> rank 0's wait times out after
# ANVIL_DIST_TIMEOUT=3 s with anvil's message. Usage: test_dist_fault.sh MPIRUN DIST_FAULT
set -uo pipefail
mpirun=$1 prog=$2
lsan=(); [[ -n ${LSAN_OPTIONS:-} ]] && lsan=(-x LSAN_OPTIONS)  # sanitizer builds
fail() { echo "FAIL: $*"; exit 1; }
run() {  # mode, bound in seconds -> sets out, rc, secs
  local t0=$SECONDS
  out=$(timeout "$2" "$mpirun" --allow-run-as-root --oversubscribe --bind-to none "${lsan[@]}" -np 2 \
        -x ANVIL_DIST_TIMEOUT=3 -x OMP_NUM_THREADS=1 "$prog" "$1" 2>&1)
  rc=$? secs=$((SECONDS - t0))
  echo "--- $1: exit $rc after $secs s"; echo "$out" | tail -n 15
}
run kill 60
[[ $rc -ne 0 && $rc -ne 124 ]] || fail "kill: expected a failed job, got exit $rc"
grep -Eq "signal 9|Killed|waited 3 s without completion" <<<"$out" ||
  fail "kill: no clear message naming the dead rank"
run stall 60
[[ $rc -ne 0 && $rc -ne 124 ]] || fail "stall: expected a failed job, got exit $rc"
grep -q "rank 0 of 2 waited 3 s without completion" <<<"$out" ||
  fail "stall: rank 0 did not report the timeout"
echo "PASS"
