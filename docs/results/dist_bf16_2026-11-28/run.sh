#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The 2-rank f32-vs-bf16 gradient bucket measurement of docs/distributed.md ("bf16 gradient
# buckets"), as run: two rounds, each interleaving the 64 MiB f32 all-reduce, the bf16
# all-reduce of the same 16 Mi elements (32 MiB on the wire), and the weak-scaling steps of fcn5
# and alexnet with f32 and with bf16 buckets (5 repetitions each, one thread per rank).
# Usage: run.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=$1 out=$2
bench=$build/bench/distributed/anvil_dist_bench
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1
     -x OMP_WAIT_POLICY=PASSIVE -np 2)
mkdir -p "$out"
for round in 1 2; do
  uptime > "$out/load_round$round.txt"
  "${mpi[@]}" "$bench" allreduce --min-bytes 67108864 --max-bytes 67108864 \
    --out "$out/allreduce_f32_round$round.json"
  "${mpi[@]}" "$bench" allreduce --min-bytes 33554432 --max-bytes 33554432 \
    --grad-bucket-dtype bf16 --out "$out/allreduce_bf16_round$round.json"
  for dtype in f32 bf16; do
    "${mpi[@]}" "$bench" steps --models fcn5,alexnet --batches 32,8 --reps 5 \
      --grad-bucket-dtype "$dtype" --out "$out/steps_${dtype}_round$round.json"
  done
  uptime >> "$out/load_round$round.txt"
done
