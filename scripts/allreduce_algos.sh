#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The all-reduce algorithms side by side (Note [All-reduce algorithms], docs/distributed.md):
# at one size (default 64 MiB), every algorithm once per repetition, interleaved so that the
# load of a shared machine hits each alike; one verified anvil_dist_bench allreduce run each.
# Then the medians, spread and speed-up over libnbc (scripts/allreduce_algos_summary.py).
# Usage: scripts/allreduce_algos.sh [--build DIR] [--out DIR] [--reps N] [--ranks N] [--bytes B]
#                                   [--algos a,b:KIB,...]   (KIB: that chunk size, default 8192)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build out=results/dist_algos_$(date -u +%Y-%m-%d) reps=5 ranks=2 bytes=67108864
algos=libnbc,chunked,ring
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --algos) algos=$2; shift 2 ;;
    -h|--help) sed -n 3,8p "$0"; exit 0 ;;
    *) echo "allreduce_algos.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
bench=$build/bench/distributed/anvil_dist_bench
[[ -x $bench ]] || { echo "allreduce_algos.sh: $bench not built" >&2; exit 1; }
mkdir -p "$out"
lscpu > "$out/lscpu.txt"
{ echo "before: $(uptime)"; } > "$out/load.txt"
IFS=, read -ra list <<< "$algos"
for ((r = 1; r <= reps; r++)); do
  for spec in "${list[@]}"; do  # ALGORITHM or ALGORITHM:CHUNK_KIB
    a=${spec%%:*} kib=8192 name=$spec
    [[ $spec == *:* ]] && { kib=${spec#*:}; name=${a}_${kib}k; }
    cmd=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$ranks"
         -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE -x ANVIL_ALLREDUCE="$a"
         -x ANVIL_ALLREDUCE_CHUNK_KIB="$kib"
         "$bench" allreduce --min-bytes "$bytes" --max-bytes "$bytes" --out "$out/${name}_rep$r.json")
    echo "+ ${cmd[*]}" >> "$out/commands.txt"
    "${cmd[@]}" | tail -n 1
  done
done
echo "after: $(uptime)" >> "$out/load.txt"
python3 "$root/scripts/allreduce_algos_summary.py" "$out" | tee "$out/summary.md"
