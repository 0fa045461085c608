#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The other papers' real-data experiments with `anvil train` (issue 7; docs/results/): Kabakus'
# MNIST MLP (Adam lr 1e-3, batch 80, 20 epochs, 20 % validation), Al-Bdour's MNIST CNN (the Keras
# example's batch 128; Adam lr 1e-3 here), and Zaremba's small PTB model on the PTB text there is,
# each at 1 and 2 threads, on Fashion-MNIST (for MNIST) and PTB. Then the data pipeline's cost:
# the MLP with and without the loader thread. Logs and JSON go to the output folder.
#
# Usage: scripts/train_experiments.sh [--anvil build/bin/anvil] [--out results/train/DATE]
#        [--threads "2 1"] [--only mlp|cnn|ptb|pipeline] [--seeds N] [--dry-run] [--help]
#
# --seeds N  runs each experiment (mlp, cnn, ptb; not the pipeline comparison) with seeds 1..N,
#            as NAME_s<seed>.log/.json, then reports per experiment how many seeds reached the
#            target, the median time to the target and its spread, as MLPerf Training does
#            (scripts/train_seeds.py, Note [Median time to target]) in seeds.md and seeds.json.
#            Default 1: one run with seed 1, named NAME.log/.json, no summary.
# --dry-run  prints every `anvil train` command and the summary command; runs and writes nothing.
# A usage error (unknown option, a bad value) prints one line and exits 2.
set -euo pipefail
cd "$(dirname "$0")/.."
anvil=build/bin/anvil
out=results/train/$(date +%Y-%m-%d)
threads="2 1"
only=""
seeds=1
dry_run=0
usage_error() { echo "train_experiments.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --anvil|--out|--threads|--only|--seeds) [[ $# -ge 2 ]] || usage_error "$1 needs a value" ;;&
    --anvil) anvil=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '3,18s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) usage_error "unknown option '$1' (--help lists them)" ;;
  esac
done
[[ $seeds =~ ^[1-9][0-9]{0,2}$ ]] || usage_error "--seeds: '$seeds' is not a whole number from 1 to 999"
[[ -z $only || $only =~ ^(mlp|cnn|ptb|pipeline)$ ]] || usage_error "--only: '$only' is not mlp, cnn, ptb or pipeline"
for t in $threads; do
  [[ $t =~ ^[1-9][0-9]*$ ]] || usage_error "--threads: '$t' is not a positive whole number"
done
[[ $dry_run == 1 ]] || mkdir -p "$out"

run() {  # run NAME ARGS...: one anvil train run, its output in NAME.log, its JSON in NAME.json
  local name=$1; shift
  if [[ $dry_run == 1 ]]; then
    echo "$anvil train $* --json-log $out/$name.json > $out/$name.log"
    return
  fi
  echo "=== $name: $anvil train $* (load: $(cut -d' ' -f1-3 /proc/loadavg))" | tee "$out/$name.log"
  "$anvil" train "$@" --json-log "$out/$name.json" >>"$out/$name.log" 2>&1
  tail -8 "$out/$name.log"
}

seeded() {  # seeded NAME ARGS...: run NAME with each seed (NAME_s<seed> when --seeds > 1)
  local name=$1; shift
  for ((s = 1; s <= seeds; s++)); do
    if ((seeds == 1)); then run "$name" "$@" --seed 1; else run "${name}_s$s" "$@" --seed "$s"; fi
  done
}

for t in $threads; do
  if [[ -z $only || $only == mlp ]]; then
    seeded "mlp_mnist_t$t" --model mlp_mnist --dataset fashion-mnist --optimizer adam --lr 1e-3 --batch 80 \
      --epochs 20 --val-split 0.2 --target-accuracy 0.88 --threads "$t"
  fi
  if [[ -z $only || $only == cnn ]]; then
    seeded "cnn_mnist_t$t" --model cnn_mnist --dataset fashion-mnist --optimizer adam --lr 1e-3 --batch 128 \
      --epochs 8 --val-split 0.2 --target-accuracy 0.91 --threads "$t"
  fi
  if [[ -z $only || $only == ptb ]]; then
    seeded "ptb_small_t$t" --model ptb_small --dataset ptb --optimizer sgd --lr 1.0 --clip 5 --lr-decay 0.5 \
      --decay-after 4 --batch 20 --epochs 13 --val-split 0.1 --threads "$t"
  fi
done
if [[ -z $only || $only == pipeline ]]; then
  for mode in thread inline; do
    flag=(); [[ $mode == inline ]] && flag=(--no-loader-thread)
    run "pipeline_mlp_$mode" --model mlp_mnist --dataset fashion-mnist --optimizer adam --lr 1e-3 --batch 80 \
      --epochs 3 --threads 2 --seed 1 "${flag[@]}"
  done
fi
if ((seeds > 1)) && [[ $only != pipeline ]]; then
  summary=(python3 scripts/train_seeds.py --json "$out/seeds.json")
  if [[ $dry_run == 1 ]]; then
    echo "${summary[*]} $out/*_s[0-9]*.json > $out/seeds.md"
  else
    "${summary[@]}" "$out"/*_s[0-9]*.json | tee "$out/seeds.md"
  fi
fi
[[ $dry_run == 1 ]] || echo "results in $out"
