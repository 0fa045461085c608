#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `anvil train` under `mpirun -np 2` end to end on a Fashion-MNIST subset: one summary (rank 0
# prints), the distributed lines and JSON context, and checkpoint/resume on 2 ranks (every rank
# resumes from rank 0's file) ending with the same test loss as the uninterrupted run.
# Usage: test_dist_train_cli.sh MPIRUN ANVIL
source "$(dirname "${BASH_SOURCE[0]}")/dist_train_prelude.sh" "$@"
run() {  # name, extra options...
  local name=$1; shift
  "$mpirun" --allow-run-as-root --oversubscribe --bind-to none "${lsan[@]}" -np 2 -x OMP_NUM_THREADS=1 \
    -x ANVIL_DIST_TIMEOUT=60 "$anvil" train --model mlp_mnist --dataset fashion-mnist \
    --subset 800 --batch 80 --optimizer adam --lr 1e-3 --threads 1 --seed 3 "$@" \
    > "$tmp/$name.out" 2>&1 || { cat "$tmp/$name.out"; fail "$name: exit status"; }
}

# Refused before any work: nccl without a GPU (checked where there is none), a batch 2 ranks do
# not divide (both print one clear line and exit 1).
if ! nvidia-smi -L >/dev/null 2>&1; then
  "$anvil" train --model mlp_mnist --dataset /nonexistent --dist nccl > "$tmp/nccl.out" 2>&1 &&
    fail "--dist nccl without a GPU succeeded"
  grep -q "the nccl backend needs a CUDA GPU" "$tmp/nccl.out" || { cat "$tmp/nccl.out"; fail "nccl refusal unclear"; }
fi
"$mpirun" --allow-run-as-root --oversubscribe --bind-to none "${lsan[@]}" -np 2 "$anvil" train \
  --model mlp_mnist --dataset /nonexistent --batch 81 > "$tmp/odd.out" 2>&1 && fail "batch 81 on 2 ranks ran"
grep -q "batch 81 is not divisible by the 2 ranks" "$tmp/odd.out" || { cat "$tmp/odd.out"; fail "odd batch refusal unclear"; }

run whole --epochs 2 --json-log "$tmp/whole.json"
[[ $(grep -c '^test accuracy' "$tmp/whole.out") == 1 ]] || fail "expected one summary (rank 0)"
grep -q '^distributed: mpi backend, 2 rank(s), 40 samples per rank per step' "$tmp/whole.out" ||
  fail "no distributed header line"
grep -q '^communication wait ' "$tmp/whole.out" || fail "no communication wait line"
[[ $(field "$tmp/whole.json" "d['distributed']['ranks']") == 2 ]] || fail "JSON lacks ranks"
run first --epochs 1 --checkpoint "$tmp/ck.safetensors"
run resumed --epochs 2 --resume "$tmp/ck.safetensors" --json-log "$tmp/resumed.json"
same_test_loss "$tmp/whole.json" "$tmp/resumed.json"
echo "PASS (test loss $loss both ways)"
