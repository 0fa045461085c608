#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The data-parallel options of `anvil train` that must not change the result:
#  - --accumulate (Note [Global batch and micro-batches] in tools/anvil/trainer.cpp): --batch is
#    the global batch of one optimizer step, so on a model without dropout or batch norm (fcn_r)
#    1 rank at --batch 40, 1 rank at --batch 40 --accumulate 2 (micro-batches of 20) and 2 ranks
#    at --batch 40 --accumulate 2 (micro-batches of 10) agree within rounding;
#  - --shard-optimizer (ZeRO-1, Note [Sharded optimizer update]): 2 ranks with Adam, sharded and
#    not, with and without --accumulate 2, agree within 1e-6 relative;
#  - --grad-bucket-dtype bf16 (Note [bf16 gradient buckets]), which does change the result: 2 ranks
#    with Adam stay within 1e-3 relative of f32 buckets, and the option reaches the log line, the
#    JSON config and the checkpoint (a bf16 checkpoint does not resume as f32).
# Synthetic MNIST-format data keeps each run to seconds.
# Usage: test_dist_train_equivalence.sh MPIRUN ANVIL
source "$(dirname "${BASH_SOURCE[0]}")/dist_train_prelude.sh" "$@"
python3 - "$tmp/data" <<'PY'
import os, random, struct, sys
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
rng = random.Random(5)
def write(name, n):
    with open(os.path.join(d, name + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28))
        f.write(bytes(rng.randrange(256) for _ in range(n * 784)))
    with open(os.path.join(d, name + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n)); f.write(bytes(rng.randrange(10) for _ in range(n)))
write("train", 200); write("t10k", 60)
PY
# 160 training samples: 4 steps of 40 per epoch; 40 validation, 60 test.
args=(train --model fcn_r --dataset "$tmp/data" --batch 40 --epochs 2 --optimizer sgd --lr 0.05
      --momentum 0.9 --threads 1 --seed 3 --no-loader-thread)
OMP_NUM_THREADS=1 "$anvil" "${args[@]}" --json-log "$tmp/plain.json" > "$tmp/plain.out" 2>&1 ||
  { cat "$tmp/plain.out"; fail "1 rank: exit status"; }
OMP_NUM_THREADS=1 "$anvil" "${args[@]}" --accumulate 2 --json-log "$tmp/acc1.json" \
  > "$tmp/acc1.out" 2>&1 || { cat "$tmp/acc1.out"; fail "1 rank, --accumulate 2: exit status"; }
run2() {  # name, options...: 2 ranks, JSON log $tmp/name.json
  local name=$1; shift
  "$mpirun" --allow-run-as-root --oversubscribe --bind-to none "${lsan[@]}" -np 2 \
    -x OMP_NUM_THREADS=1 -x ANVIL_DIST_TIMEOUT=60 "$anvil" "$@" --json-log "$tmp/$name.json" \
    > "$tmp/$name.out" 2>&1 || { cat "$tmp/$name.out"; fail "$name: exit status"; }
}
run2 acc2 "${args[@]}" --accumulate 2
grep -q '^distributed: mpi backend, 2 rank(s), 20 samples per rank per step in 2 micro-batches of 10 (global batch 40 per step' \
  "$tmp/acc2.out" || { cat "$tmp/acc2.out"; fail "no micro-batch statement in the distributed line"; }
grep -q '^distributed: single backend, 1 rank(s), 40 samples per rank per step in 2 micro-batches of 20' \
  "$tmp/acc1.out" || { cat "$tmp/acc1.out"; fail "no micro-batch statement on 1 rank"; }
# Same samples per step, no dropout or batch norm: the runs differ by where the means are rounded
# (Note [Data-parallel determinism]); tolerance 1e-4 relative, as dist_train_ptb.
python3 - "$tmp/plain.json" "$tmp/acc1.json" "$tmp/acc2.json" <<'PY' || fail "the runs differ"
import json, sys
runs = [json.load(open(p)) for p in sys.argv[1:4]]
names = ["1 rank", "1 rank x 2 micro-batches", "2 ranks x 2 micro-batches"]
assert [r["config"]["accumulate"] for r in runs] == [1, 2, 2], "JSON config lacks accumulate"
def values(r):
    v = [("test loss", r["result"]["test_loss"])]
    for e in r["epochs"]:
        v += [(f"epoch {e['epoch']} train loss", e["train_loss"]),
              (f"epoch {e['epoch']} val loss", e["val_loss"])]
    return v
base = values(runs[0])
worst = 0.0
for name, r in zip(names[1:], runs[1:]):
    for (what, a), (_, b) in zip(base, values(r)):
        rel = abs(a - b) / abs(a)
        worst = max(worst, rel)
        print(f"{what}: 1 rank {a!r}, {name} {b!r}, relative difference {rel:.2e}")
# Seen failing: with no_sync disabled (every micro-batch's hooks reduce and mark the buckets
# filled) the 2-rank losses differ by up to 1.5e-1.
sys.exit(0 if worst <= 1e-4 else 1)
PY

# ZeRO-1 against plain data parallelism, Adam (per-element moments on each rank's block).
adam=(train --model fcn_r --dataset "$tmp/data" --batch 40 --epochs 2 --optimizer adam
      --lr 1e-3 --threads 1 --seed 3 --no-loader-thread)
run2 adam_plain "${adam[@]}"
run2 adam_shard "${adam[@]}" --shard-optimizer
run2 adam_shard_acc "${adam[@]}" --shard-optimizer --accumulate 2
run2 adam_acc "${adam[@]}" --accumulate 2
grep -q '^data parallel: .*ZeRO-1: reduce-scatter, the optimizer updates [0-9]* of [0-9]* elements on this rank' \
  "$tmp/adam_shard.out" || { cat "$tmp/adam_shard.out"; fail "no ZeRO-1 line"; }
python3 - "$tmp"/adam_{plain,shard,acc,shard_acc}.json <<'PY' || fail "ZeRO-1 differs from plain DP"
import json, sys
plain, shard, acc, shard_acc = (json.load(open(p)) for p in sys.argv[1:5])
assert shard["config"]["shard_optimizer"] is True and plain["config"]["shard_optimizer"] is False
def values(r):
    return [r["result"]["test_loss"]] + [e[k] for e in r["epochs"] for k in ("train_loss", "val_loss")]
worst = 0.0
for name, a, b in (("sharded", plain, shard), ("sharded, accumulate 2", acc, shard_acc)):
    for x, y in zip(values(a), values(b)):
        worst = max(worst, abs(x - y) / abs(x))
    print(f"ZeRO-1 {name}: test loss {values(b)[0]!r} vs plain {values(a)[0]!r}")
print(f"largest relative difference {worst:.2e}")
sys.exit(0 if worst <= 1e-6 else 1)
PY

# bf16 buckets against f32 buckets (adam_plain): close, not equal (measured 4.9e-06 relative).
run2 adam_bf16 "${adam[@]}" --grad-bucket-dtype bf16 --checkpoint "$tmp/bf16.safetensors"
grep -q '^data parallel: .*bf16 on the wire' "$tmp/adam_bf16.out" ||
  { cat "$tmp/adam_bf16.out"; fail "no bf16 in the data parallel line"; }
python3 - "$tmp"/adam_{plain,bf16}.json <<'PY' || fail "bf16 buckets too far from f32 buckets"
import json, sys
f32, bf16 = (json.load(open(p)) for p in sys.argv[1:3])
assert bf16["config"]["grad_bucket_dtype"] == "bf16" and f32["config"]["grad_bucket_dtype"] == "f32"
def values(r):
    return [r["result"]["test_loss"]] + [e[k] for e in r["epochs"] for k in ("train_loss", "val_loss")]
worst = max(abs(x - y) / abs(x) for x, y in zip(values(f32), values(bf16)))
print(f"bf16 buckets: test loss {values(bf16)[0]!r} vs f32 {values(f32)[0]!r}, "
      f"largest relative difference {worst:.2e}")
# Not seen failing here: the op's rounding is checked bit for bit in test_dist_allreduce_algos.cpp;
# this checks the flag reaches the buckets (worst > 0) and stays close.
sys.exit(0 if 0 < worst <= 1e-3 else 1)
PY
OMP_NUM_THREADS=1 "$anvil" train --model fcn_r --dataset "$tmp/data" --batch 40 --epochs 3 \
  --optimizer adam --lr 1e-3 --threads 1 --seed 3 --no-loader-thread --resume "$tmp/bf16.safetensors" \
  > "$tmp/resume_f32.out" 2>&1 && fail "a bf16 checkpoint resumed with f32 buckets"
grep -q "anvil_train.grad_bucket_dtype = bf16 but this run has f32" "$tmp/resume_f32.out" ||
  { cat "$tmp/resume_f32.out"; fail "no grad_bucket_dtype in the resume refusal"; }
echo PASS
