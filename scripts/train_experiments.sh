#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The other papers' real-data experiments with `anvil train` (issue 7; docs/results/): Kabakus'
# MNIST MLP (Adam lr 1e-3, batch 80, 20 epochs, 20 % validation), Al-Bdour's MNIST CNN (the Keras
# example's batch 128; Adam lr 1e-3 here), and Zaremba's small PTB model on the PTB text there is,
# each at 1 and 2 threads, on Fashion-MNIST (for MNIST) and PTB. Then the data pipeline's cost:
# the MLP with and without the loader thread. Logs and JSON go to the output folder.
# Usage: scripts/train_experiments.sh [--anvil build/bin/anvil] [--out results/train/DATE]
#        [--threads "2 1"] [--only mlp|cnn|ptb|pipeline]
set -euo pipefail
cd "$(dirname "$0")/.."
anvil=build/bin/anvil
out=results/train/$(date +%Y-%m-%d)
threads="2 1"
only=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --anvil) anvil=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"

run() {  # run NAME ARGS...: one anvil train run, its output in NAME.log, its JSON in NAME.json
  local name=$1; shift
  echo "=== $name: $anvil train $* (load: $(cut -d' ' -f1-3 /proc/loadavg))" | tee "$out/$name.log"
  "$anvil" train "$@" --json-log "$out/$name.json" >>"$out/$name.log" 2>&1
  tail -8 "$out/$name.log"
}

for t in $threads; do
  if [[ -z $only || $only == mlp ]]; then
    run "mlp_mnist_t$t" --model mlp_mnist --dataset fashion-mnist --optimizer adam --lr 1e-3 --batch 80 \
      --epochs 20 --val-split 0.2 --target-accuracy 0.88 --threads "$t" --seed 1
  fi
  if [[ -z $only || $only == cnn ]]; then
    run "cnn_mnist_t$t" --model cnn_mnist --dataset fashion-mnist --optimizer adam --lr 1e-3 --batch 128 \
      --epochs 8 --val-split 0.2 --target-accuracy 0.91 --threads "$t" --seed 1
  fi
  if [[ -z $only || $only == ptb ]]; then
    run "ptb_small_t$t" --model ptb_small --dataset ptb --optimizer sgd --lr 1.0 --clip 5 --lr-decay 0.5 \
      --decay-after 4 --batch 20 --epochs 13 --val-split 0.1 --threads "$t" --seed 1
  fi
done
if [[ -z $only || $only == pipeline ]]; then
  for mode in thread inline; do
    flag=(); [[ $mode == inline ]] && flag=(--no-loader-thread)
    run "pipeline_mlp_$mode" --model mlp_mnist --dataset fashion-mnist --optimizer adam --lr 1e-3 --batch 80 \
      --epochs 3 --threads 2 --seed 1 "${flag[@]}"
  done
fi
echo "results in $out"
