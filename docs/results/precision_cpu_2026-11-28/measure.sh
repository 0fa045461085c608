#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One round of the fp32/bf16 CPU train-step comparison, interleaved: for each thread count and
# model, anvil fp32, anvil bf16, PyTorch fp32, PyTorch bf16 (one process each), others niced.
#   bash measure.sh ROUND [OUT_DIR]     (from the repository root; THREADS="2" for one count)
set -u
round=$1
out=${2:-$PWD/precision_results}
mkdir -p "$out"
mine=$(cut -d' ' -f1 /proc/self/autogroup)
groups=$out/niced_groups_r$round.txt  # the autogroups this run set to 19 (and only those go back)
: > "$groups"
nice_others() {
  for p in /proc/[0-9]*; do
    ag=$(cat "$p/autogroup" 2>/dev/null) || continue
    g=${ag%% *}
    [ "$g" = "$mine" ] && continue
    case "$ag" in *"nice 0") echo 19 > "$p/autogroup" 2>/dev/null && echo "$g" >> "$groups" ;; esac
  done
}
restore() {
  for p in /proc/[0-9]*; do
    ag=$(cat "$p/autogroup" 2>/dev/null) || continue
    g=${ag%% *}
    grep -qx -- "$g" "$groups" && case "$ag" in *"nice 19") echo 0 > "$p/autogroup" 2>/dev/null ;; esac
  done
}
# Every group may already be at 19 (another window's leftover): this one's group goes to 0 for
# the window and back to what it was after.
my_nice_before=$(cut -d' ' -f3 /proc/self/autogroup)
echo 0 > /proc/self/autogroup
trap 'restore; echo "$my_nice_before" > /proc/$$/autogroup' EXIT
(while true; do nice_others; sleep 3; done) &
keeper=$!
nice_others
for t in ${THREADS:-1 2}; do
  for m in fcn5 alexnet; do
    for p in fp32 bf16; do
      OMP_WAIT_POLICY=PASSIVE ./build/bench/anvil_bench --anvil_models=$m --anvil_precision=$p \
        --anvil_threads=$t --anvil_kernels=off --anvil_gpu=off \
        --benchmark_filter="^model/$m/train_step/" --benchmark_out=$out/anvil_${m}_t${t}_${p}_r$round.json \
        --benchmark_out_format=json > /dev/null 2>>$out/stderr_r$round.txt
    done
    for p in fp32 bf16; do
      python3 bench/peers/pytorch_models.py run --models $m --threads $t --phases train --reps 1 \
        --warmup 2 --min-steps 1 --min-time 2 --config preset --precision $p \
        >> $out/peer_pytorch_r$round.jsonl 2>>$out/stderr_r$round.txt
    done
  done
done
kill $keeper
wait $keeper 2>/dev/null
restore
echo "$my_nice_before" > /proc/$$/autogroup
trap - EXIT
