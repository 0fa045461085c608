#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `anvil_dist_bench steps` at 2 ranks records each gradient bucket's size and ready time (Note
# [Bucket ready times]): mlp_mnist at a 0.5 MiB cap has 4 buckets; their sizes add up to the
# gradient, their ready times rise within backward, and scripts/dist_sim.py simulates the run from
# the recorded timeline (not the layout run, not the bytes approximation). Beside them
# DataParallel's timeline (Note [Bucket timeline]): per bucket, complete <= start <= done, starts
# in bucket order, the median step within [min, max] of 5 repetitions.
# Usage: test_dist_bench_timeline.sh MPIRUN ANVIL_DIST_BENCH REPO_ROOT
set -uo pipefail
mpirun=$1 bench=$2 root=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lsan=(); [[ -n ${LSAN_OPTIONS:-} ]] && lsan=(-x LSAN_OPTIONS)  # sanitizer builds
for step in steps allreduce; do
  extra=(--models mlp_mnist --batches 16 --reps 5 --bucket-mb 0.5)
  [[ $step == allreduce ]] && extra=(--max-bytes 4194304)
  "$mpirun" --allow-run-as-root --oversubscribe --bind-to none "${lsan[@]}" -np 2 \
    -x OMP_NUM_THREADS=1 -x ANVIL_DIST_TIMEOUT=60 "$bench" $step "${extra[@]}" \
    --out "$tmp/$step.json" > "$tmp/$step.out" 2>&1 || { cat "$tmp/$step.out"; echo "FAIL: $step"; exit 1; }
done
mkdir "$tmp/run"
mv "$tmp/steps.json" "$tmp/run/steps_np2_weak.json"
mv "$tmp/allreduce.json" "$tmp/run/allreduce_np2.json"
python3 - "$tmp/run" "$root" <<'PY'
import json, os, sys
run, root = sys.argv[1], sys.argv[2]
r = json.load(open(os.path.join(run, "steps_np2_weak.json")))["steps"][0]
sizes, ready, end = r["bucket_bytes"], r["bucket_ready_s"], r["bucket_ready_backward_s"]
assert r["buckets"] == 4 == len(sizes) == len(ready), r
assert sum(sizes) == r["grad_bytes"], (sizes, r["grad_bytes"])
assert 0 < ready[0] and all(a <= b for a, b in zip(ready, ready[1:])) and ready[-1] <= end, r
complete, start, done = r["bucket_complete_s"], r["bucket_start_s"], r["bucket_done_s"]
assert len(complete) == len(start) == len(done) == 4, r
# Each rank: complete <= start <= done; the slowest rank's of each can only keep that order.
assert all(0 < c <= s <= d for c, s, d in zip(complete, start, done)), r
assert all(a <= b for a, b in zip(start, start[1:])), r
assert r["step_s_min"] <= r["step_s"] <= r["step_s_max"] and len(r["step_s_all"]) == 5, r
sys.path.insert(0, os.path.join(root, "scripts"))
import dist_sim
rows, skipped = dist_sim.validate(run, layout_path=None)
assert not skipped and rows and all(x["ready"] == "recorded" for x in rows), (rows, skipped)
print("PASS")
PY
