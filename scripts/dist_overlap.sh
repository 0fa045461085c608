#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# How much of the gradient all-reduce the overlap hides (docs/distributed.md, Note [Paired
# overlap measurement] in bench/distributed/dist_bench.cpp): `anvil_dist_bench overlap` at 2 ranks,
# one thread each, in rounds that alternate the MPI progress modes (hooks only, and a progress
# thread: Note [MPI progress thread]), so that a shared machine's load hits both alike; then
# scripts/dist_overlap_report.py. Usage:
#   scripts/dist_overlap.sh [--build DIR] [--out DIR] [--rounds N] [--first-round K] [--reps N]
#                           [--models m1,m2] [--batches b1,b2] [--modes hooks,thread]
# (--first-round K numbers the rounds from K, to add rounds to an earlier --out folder.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build out=results/dist_overlap_$(date -u +%Y-%m-%d) rounds=2 reps=3 first=1
models=fcn5,fcn8,alexnet modes=hooks,thread
batches=64,64,16  # per rank (weak scaling: the papers' CPU batch on every rank)
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --first-round) first=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    -h|--help) sed -n 3,10p "$0"; exit 0 ;;
    *) echo "dist_overlap.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
bench=$build/bench/distributed/anvil_dist_bench
[[ -x $bench ]] || { echo "dist_overlap.sh: $bench not built (cmake --build $build --target anvil_dist_bench anvil_mpi)" >&2; exit 1; }
mkdir -p "$out"
lscpu > "$out/lscpu.txt"
run() { echo "+ $*" | tee -a "$out/commands.txt"; "$@"; }
for ((r = first; r < first + rounds; ++r)); do
  for mode in ${modes//,/ }; do
    echo "round $r $mode: $(cat /proc/loadavg)" >> "$out/load.txt"
    run mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 \
      -x OMP_WAIT_POLICY=PASSIVE -x ANVIL_MPI_PROGRESS="$mode" -np 2 "$bench" overlap \
      --models "$models" --batches "$batches" --reps "$reps" --out "$out/overlap_${mode}_r$r.json"
  done
done
echo "end: $(cat /proc/loadavg)" >> "$out/load.txt"
python3 "$root/scripts/dist_overlap_report.py" "$out" > "$out/overlap.md"
echo "dist_overlap.sh: wrote $out/overlap.md"
