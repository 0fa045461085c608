#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Distributed benchmarks on this machine (docs/distributed.md): the all-reduce sweep
# (4 B .. 256 MiB) at every rank count of --ranks above 1 (default 2), and the training step of
# every DLBench network at 1 rank (global batch B) and at each rank count n (B/n per rank: strong
# scaling; B per rank: weak scaling, overlapped and, at --plain-ranks, not), one thread per rank;
# then the report with the bucket-order simulator's validation (scripts/dist_report.py)
# and, with more than one rank count, the scaling table (scripts/dist_scaling_report.py).
# The baselines (Note [Baselines] in bench/distributed/dist_bench.cpp; --no-baselines skips them):
# the memory-bandwidth triad at 1 rank and at each n (triad_np<n>.json, Note [Triad ceiling]), the
# 1-rank step with SGD unfolded (steps_np1_unfolded.json) and n uncoupled replicas at B per rank
# (steps_np<n>_uncoupled.json). --grad-bucket-dtypes f32,bf16 adds, per n, the all-reduce sweep
# of the bf16 wire format (allreduce_np<n>_bf16.json) and the weak steps with bf16 gradient
# buckets (steps_np<n>_weak_bf16.json). Every step run takes --reps repetitions (default 5) and
# records their median, min and max. Usage:
#   scripts/dist_bench.sh [--build DIR] [--out DIR] [--reps N] [--models m1,m2] [--batches b1,b2]
#                         [--max-bytes BYTES] [--ranks 2,4,..] [--plain-ranks 2,..] [--bind none|core]
#                         [--timeout S] [--budget S] [--no-baselines] [--grad-bucket-dtypes f32,bf16]
# --bind core: one rank per core (mpirun --bind-to core --map-by core); none (default) lets ranks
# share a small machine. --timeout: each mpirun at most S seconds; --budget: all of them together
# at most S seconds (a run that would start with less than 10 s left is skipped and listed).
# A failed, timed-out or skipped run is listed in commands.txt and makes the exit status 1, and
# the others still run. Strong scaling needs n to divide B (other models are left out at that n).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build out=results/dist_$(date -u +%Y-%m-%d) reps=5 baselines=1 dtypes=f32
models=fcn5,fcn8,alexnet,resnet50,vgg16,lstm32,lstm64
# Global batches: the papers' CPU batch, except ResNet-50 and VGG16 (8 and 4: a step at 16 takes
# tens of seconds on one core of a 2-core machine).
batches=64,64,16,8,4,128,128
max_bytes=268435456 ranks=2 plain_ranks='' bind=none timeout_s=0 budget=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --max-bytes) max_bytes=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --plain-ranks) plain_ranks=$2; shift 2 ;;
    --bind) bind=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --no-baselines) baselines=0; shift ;;
    --grad-bucket-dtypes) dtypes=$2; shift 2 ;;
    -h|--help) sed -n 3,23p "$0"; exit 0 ;;
    *) echo "dist_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
bench=$build/bench/distributed/anvil_dist_bench
[[ -x $bench ]] || { echo "dist_bench.sh: $bench not built (cmake --build $build --target anvil_dist_bench anvil_mpi)" >&2; exit 1; }
[[ $bind == none || $bind == core ]] || { echo "dist_bench.sh: --bind none|core, got $bind" >&2; exit 2; }
plain_ranks=${plain_ranks:-$ranks}
mkdir -p "$out"
mpi=(mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE)
if [[ $bind == core ]]; then mpi+=(--bind-to core --map-by core); else mpi+=(--bind-to none); fi
lscpu > "$out/lscpu.txt"
uptime > "$out/load.txt"  # a shared machine: the load average says how much of it was ours
: > "$out/commands.txt"
status=0 t_start=$SECONDS
run() {  # every mpirun under the per-run timeout and what is left of the budget
  local limit=$timeout_s
  if [[ $budget -gt 0 ]]; then
    local left=$((budget - (SECONDS - t_start)))
    if [[ $left -lt 10 ]]; then echo "SKIPPED (budget of $budget s spent): $*" | tee -a "$out/commands.txt"; status=1; return; fi
    [[ $limit -eq 0 || $left -lt $limit ]] && limit=$left
  fi
  echo "+ $*" | tee -a "$out/commands.txt"
  local t0=$SECONDS rc
  if [[ $limit -gt 0 ]]; then timeout -k 10 "$limit" "$@"; else "$@"; fi
  rc=$?
  [[ $rc == 124 || $rc == 137 ]] && echo "TIMEOUT after $limit s: $*" | tee -a "$out/commands.txt"
  echo "  exit $rc in $((SECONDS - t0)) s" >> "$out/commands.txt"
  [[ $rc == 0 ]] || status=1
}
# "fcn5,lstm32" "64,128" N: the models whose global batch N divides, and their batches / N.
divided() {
  python3 - "$1" "$2" "$3" <<'PY'
import sys
ms, bs, n = sys.argv[1].split(","), [int(b) for b in sys.argv[2].split(",")], int(sys.argv[3])
keep = [(m, b // n) for m, b in zip(ms, bs) if b % n == 0]
print(",".join(m for m, _ in keep), ",".join(str(b) for _, b in keep))
PY
}
in_list() { [[ ,$2, == *,$1,* ]]; }
IFS=, read -r -a rank_list <<< "$ranks"
bf16=0
in_list bf16 "$dtypes" && bf16=1
if [[ $baselines == 1 ]]; then  # the memory ceiling first, while nothing else of ours runs
  run "${mpi[@]}" -np 1 "$bench" triad --out "$out/triad_np1.json"
  for n in "${rank_list[@]}"; do
    [[ $n -gt 1 ]] && run "${mpi[@]}" -np "$n" "$bench" triad --out "$out/triad_np$n.json"
  done
fi
for n in "${rank_list[@]}"; do
  [[ $n -gt 1 ]] || continue
  run "${mpi[@]}" -np "$n" "$bench" allreduce --max-bytes "$max_bytes" --out "$out/allreduce_np$n.json"
  [[ $bf16 == 1 ]] && run "${mpi[@]}" -np "$n" "$bench" allreduce --max-bytes "$max_bytes" \
    --grad-bucket-dtype bf16 --out "$out/allreduce_np${n}_bf16.json"
done
run "${mpi[@]}" -np 1 "$bench" steps --models "$models" --batches "$batches" --reps "$reps" --out "$out/steps_np1.json"
[[ $baselines == 1 ]] && run "${mpi[@]}" -np 1 "$bench" steps --models "$models" --batches "$batches" \
  --reps "$reps" --baseline unfolded --out "$out/steps_np1_unfolded.json"
for n in "${rank_list[@]}"; do
  [[ $n -gt 1 ]] || continue
  read -r smodels sbatches <<< "$(divided "$models" "$batches" "$n")"
  if [[ -n $smodels ]]; then
    run "${mpi[@]}" -np "$n" "$bench" steps --models "$smodels" --batches "$sbatches" --reps "$reps" --out "$out/steps_np${n}_strong.json"
  fi
  run "${mpi[@]}" -np "$n" "$bench" steps --models "$models" --batches "$batches" --reps "$reps" --out "$out/steps_np${n}_weak.json"
  [[ $baselines == 1 ]] && run "${mpi[@]}" -np "$n" "$bench" steps --models "$models" --batches "$batches" \
    --reps "$reps" --baseline uncoupled --out "$out/steps_np${n}_uncoupled.json"
  [[ $bf16 == 1 ]] && run "${mpi[@]}" -np "$n" "$bench" steps --models "$models" --batches "$batches" \
    --reps "$reps" --grad-bucket-dtype bf16 --out "$out/steps_np${n}_weak_bf16.json"
  if in_list "$n" "$plain_ranks"; then
    run "${mpi[@]}" -np "$n" "$bench" steps --models "$models" --batches "$batches" --reps "$reps" --no-overlap --out "$out/steps_np${n}_weak_nooverlap.json"
  fi
done
uptime >> "$out/load.txt"
python3 "$root/scripts/dist_report.py" "$out" > "$out/report.md" || status=1
echo "dist_bench.sh: wrote $out/report.md"
if [[ ${#rank_list[@]} -gt 1 ]]; then
  python3 "$root/scripts/dist_scaling_report.py" "$out" > "$out/scaling.md" || status=1
  echo "dist_bench.sh: wrote $out/scaling.md"
fi
exit $status
