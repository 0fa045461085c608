#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Distributed benchmarks on this machine (docs/distributed.md): the all-reduce sweep
# (4 B .. 256 MiB) at 2 ranks, and the training step of every DLBench network at 1 rank (global
# batch B) and 2 ranks (B/2 per rank: strong scaling; B per rank: weak scaling, overlapped and
# not), one thread per rank; then the report with the alpha-beta projection
# (scripts/dist_report.py). Usage:
#   scripts/dist_bench.sh [--build DIR] [--out DIR] [--reps N] [--models m1,m2] [--batches b1,b2]
#                         [--max-bytes BYTES]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build out=results/dist_$(date -u +%Y-%m-%d) reps=2
models=fcn5,fcn8,alexnet,resnet50,vgg16,lstm32,lstm64
# Global batches: the papers' CPU batch, except ResNet-50 and VGG16 (8 and 4: a step at 16 takes
# tens of seconds on one core of a 2-core machine).
batches=64,64,16,8,4,128,128
max_bytes=268435456
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --max-bytes) max_bytes=$2; shift 2 ;;
    -h|--help) sed -n 3,9p "$0"; exit 0 ;;
    *) echo "dist_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
bench=$build/bench/distributed/anvil_dist_bench
[[ -x $bench ]] || { echo "dist_bench.sh: $bench not built (cmake --build $build --target anvil_dist_bench anvil_mpi)" >&2; exit 1; }
mkdir -p "$out"
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE)
half=$(python3 -c "print(','.join(str(int(b)//2) for b in '$batches'.split(',')))")
lscpu > "$out/lscpu.txt"
uptime > "$out/load.txt"  # a shared machine: the load average says how much of it was ours
run() { echo "+ $*" | tee -a "$out/commands.txt"; "$@"; }
run "${mpi[@]}" -np 2 "$bench" allreduce --max-bytes "$max_bytes" --out "$out/allreduce_np2.json"
run "${mpi[@]}" -np 1 "$bench" steps --models "$models" --batches "$batches" --reps "$reps" --out "$out/steps_np1.json"
run "${mpi[@]}" -np 2 "$bench" steps --models "$models" --batches "$half" --reps "$reps" --out "$out/steps_np2_strong.json"
run "${mpi[@]}" -np 2 "$bench" steps --models "$models" --batches "$batches" --reps "$reps" --out "$out/steps_np2_weak.json"
run "${mpi[@]}" -np 2 "$bench" steps --models "$models" --batches "$batches" --reps "$reps" --no-overlap --out "$out/steps_np2_weak_nooverlap.json"
uptime >> "$out/load.txt"
python3 "$root/scripts/dist_report.py" "$out" > "$out/report.md"
echo "dist_bench.sh: wrote $out/report.md"
