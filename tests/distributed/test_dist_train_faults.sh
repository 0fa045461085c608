#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The distributed fault suite of `anvil train` at 2 ranks (docs/distributed.md, "Failures"):
# ranks started with disagreeing options, one rank failing before or after the first
# collective, one rank stalled (also under --accumulate 2, --shard-optimizer,
# --grad-bucket-dtype bf16 and the chunked and ring all-reduces). Every case must end the whole job
# within BOUND seconds with a non-zero status and exactly one "anvil: error:" line naming the
# problem, and leave the checkpoint it was given byte for byte as it was. A small synthetic MNIST-format dataset keeps
# every run to a few seconds. Usage: test_dist_train_faults.sh MPIRUN ANVIL
set -uo pipefail
mpirun=$1 anvil=$2
bound=${ANVIL_FAULT_BOUND:-15}  # seconds a failing job may take, mpirun's start included
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lsan=(); [[ -n ${LSAN_OPTIONS:-} ]] && lsan=(-x LSAN_OPTIONS)  # sanitizer builds
failures=0

# MNIST-format IDX files: 400 training and 100 test images of 28x28 bytes, labels 0-9; with
# BAD_LABEL one training label is 12 (outside [0, 10)).
make_data() {  # dir [bad_label]
  python3 - "$@" <<'PY'
import os, random, struct, sys
d = sys.argv[1]; bad = len(sys.argv) > 2
os.makedirs(d, exist_ok=True)
rng = random.Random(7)
def write(name, n, labels):
    with open(os.path.join(d, name + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28))
        f.write(bytes(rng.randrange(256) for _ in range(n * 784)))
    with open(os.path.join(d, name + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n)); f.write(bytes(labels))
train = [rng.randrange(10) for _ in range(400)]
if bad: train[123] = 12
write("train", 400, train)
write("t10k", 100, [rng.randrange(10) for _ in range(100)])
PY
}
make_data "$tmp/data"
make_data "$tmp/bad" bad

opts=(train --model mlp_mnist --dataset "$tmp/data" --batch 40 --epochs 2 --optimizer adam
      --lr 1e-3 --threads 1 --seed 3 --no-loader-thread)
# with OPTION VALUE...: prints opts with those options' values replaced, one per line (the
# parser refuses an option given twice).
with() {
  local a=("${opts[@]}") i j
  for ((i = 0; i < ${#a[@]}; i++)); do
    for ((j = 1; j < $#; j += 2)); do
      [[ ${a[i]} == "${!j}" ]] && { local k=$((j + 1)); a[i + 1]=${!k}; }
    done
  done
  printf '%s\n' "${a[@]}"
}
mpi=("$mpirun" --allow-run-as-root --oversubscribe --bind-to none)

# A checkpoint after epoch 1 (one process: the metadata does not name the rank count).
mapfile -t prep < <(with --epochs 1)
"$anvil" "${prep[@]}" --checkpoint "$tmp/ck.safetensors" > "$tmp/prep.out" 2>&1 ||
  { cat "$tmp/prep.out"; echo "FAIL: preparing the checkpoint"; exit 1; }
ck_sum=$(sha256sum < "$tmp/ck.safetensors")

# expect NAME REGEX [VAR=VALUE...] -- RANK0_OPTIONS... : RANK1_OPTIONS...
# Runs `mpirun -np 1 anvil OPTS0 : -np 1 anvil OPTS1`; the job must fail within $bound s with
# one "anvil: error:" line matching REGEX, and the checkpoint must be untouched.
expect() {
  local name=$1 want=$2; shift 2
  # Open MPI's -x applies to the application context it is in: given to each.
  local env=("${lsan[@]}" -x OMP_NUM_THREADS=1) r0=() r1=()
  while [[ $1 != -- ]]; do env+=(-x "$1"); shift; done; shift
  while [[ $1 != : ]]; do r0+=("$1"); shift; done; shift
  r1=("$@")
  local t0 t1 rc
  t0=$(date +%s.%N)
  cp "$tmp/ck.safetensors" "$tmp/ck.before"  # each case starts from the same checkpoint
  timeout $((bound + 15)) "${mpi[@]}" -np 1 "${env[@]}" "$anvil" "${r0[@]}" : \
    -np 1 "${env[@]}" "$anvil" "${r1[@]}" > "$tmp/$name.out" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  local secs lines problems=()
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  lines=$(grep -c '^anvil: error:' "$tmp/$name.out")
  [[ $rc -ne 0 ]] || problems+=("exit status 0")
  [[ $rc -ne 124 ]] || problems+=("still running after $((bound + 15)) s (killed)")
  awk -v s="$secs" -v b="$bound" 'BEGIN { exit !(s <= b) }' || problems+=("took $secs s > $bound s")
  [[ $lines == 1 ]] || problems+=("$lines 'anvil: error:' lines, expected 1")
  grep -Eq "^anvil: error: .*$want" "$tmp/$name.out" || problems+=("no error line matching '$want'")
  [[ $(sha256sum < "$tmp/ck.safetensors") == "$ck_sum" ]] || problems+=("the checkpoint changed")
  cp "$tmp/ck.before" "$tmp/ck.safetensors"
  if [[ ${#problems[@]} -eq 0 ]]; then
    echo "ok   $name: exit $rc after $secs s: $(grep -m1 '^anvil: error:' "$tmp/$name.out")"
  else
    echo "FAIL $name: exit $rc after $secs s: $(IFS=';'; echo "${problems[*]}")"
    tail -n 12 "$tmp/$name.out" | sed 's/^/     | /'
    failures=$((failures + 1))
  fi
}

# Long collective timeout for the cases that must not depend on it: an error on one rank has to
# end the job by itself, not by the peers' timeout.
long=ANVIL_DIST_TIMEOUT=60
ck=(--checkpoint "$tmp/ck.safetensors")

# Ranks that disagree: the configuration handshake names the field and both values.
mapfile -t o_batch < <(with --batch 20)
mapfile -t o_model < <(with --model fcn_r)
mapfile -t o_seed < <(with --seed 4)
mapfile -t o_epochs < <(with --epochs 3)
mapfile -t o_sgd < <(with --optimizer sgd --lr 0.01)
mapfile -t o_bad < <(with --dataset "$tmp/bad")
expect batch 'ranks disagree on batch: rank 0 has 40, rank 1 has 20' $long -- \
  "${opts[@]}" "${ck[@]}" : "${o_batch[@]}" "${ck[@]}"
expect model 'ranks disagree on model: rank 0 has mlp_mnist, rank 1 has fcn_r' $long -- \
  "${opts[@]}" "${ck[@]}" : "${o_model[@]}" "${ck[@]}"
expect seed 'ranks disagree on seed: rank 0 has 3, rank 1 has 4' $long -- \
  "${opts[@]}" "${ck[@]}" : "${o_seed[@]}" "${ck[@]}"
expect epochs 'ranks disagree on epochs: rank 0 has 2, rank 1 has 3' $long -- \
  "${opts[@]}" "${ck[@]}" : "${o_epochs[@]}" "${ck[@]}"
expect optimizer 'ranks disagree on optimizer: rank 0 has adam .*, rank 1 has sgd ' $long -- \
  "${opts[@]}" "${ck[@]}" : "${o_sgd[@]}" "${ck[@]}"
expect bucket 'ranks disagree on bucket cap: rank 0 has 25 MiB, rank 1 has 1 MiB' $long -- \
  "${opts[@]}" "${ck[@]}" : "${opts[@]}" "${ck[@]}" --bucket-mb 1
expect accumulate 'ranks disagree on accumulate: rank 0 has 1 micro-batch\(es\), rank 1 has 2 micro-batch\(es\)' \
  $long -- "${opts[@]}" "${ck[@]}" : "${opts[@]}" "${ck[@]}" --accumulate 2
expect shard 'ranks disagree on shard optimizer: rank 0 has off, rank 1 has on' \
  $long -- "${opts[@]}" : "${opts[@]}" --shard-optimizer
expect bucket_dtype 'ranks disagree on grad bucket dtype: rank 0 has f32, rank 1 has bf16' \
  $long -- "${opts[@]}" "${ck[@]}" : "${opts[@]}" "${ck[@]}" --grad-bucket-dtype bf16
expect samples 'ranks disagree on samples: rank 0 has 320 train' $long -- \
  "${opts[@]}" "${ck[@]}" : "${opts[@]}" "${ck[@]}" --subset 200
expect resume_one_rank 'ranks disagree on resume: rank 0 has epoch 1 of ' $long -- \
  "${opts[@]}" "${ck[@]}" --resume "$tmp/ck.safetensors" : "${opts[@]}" "${ck[@]}"

# One rank fails before the first collective: a missing --resume file, a bad label.
expect resume_missing 'rank 1 of 2: .*missing.safetensors' $long -- \
  "${opts[@]}" "${ck[@]}" --resume "$tmp/ck.safetensors" : \
  "${opts[@]}" "${ck[@]}" --resume "$tmp/missing.safetensors"
expect bad_label 'rank 1 of 2: .*label 12 at index 123' $long -- \
  "${opts[@]}" "${ck[@]}" : "${o_bad[@]}" "${ck[@]}"

# One rank fails after the first collective, in the middle of epoch 1 (Note [Test fault hook]).
expect error_in_step 'rank 1 of 2: .*test fault \(ANVIL_TEST_FAULT\) on rank 1 at step 3' \
  $long ANVIL_TEST_FAULT=error@1:3 -- "${opts[@]}" "${ck[@]}" : "${opts[@]}" "${ck[@]}"

# One rank stalls (SIGSTOP) at step 3: rank 0's wait times out after ANVIL_DIST_TIMEOUT and the
# job ends, the stopped rank with it.
before=$failures
expect stall 'rank 0 of 2: .*waited 3 s without completion' ANVIL_DIST_TIMEOUT=3 \
  ANVIL_TEST_FAULT=stall@1:3 -- "${opts[@]}" "${ck[@]}" : "${opts[@]}" "${ck[@]}"
alive() {  # pid: running or stopped (a zombie has ended; its parent reaps it soon)
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $st != Z* ]]
}
# The stalled rank's pid is in the output (Note [Test fault hook]): it must be gone.
check_stalled_gone() {  # case name, failures before it
  local stalled_pid
  stalled_pid=$(sed -n 's/.*rank 1 (pid \([0-9]*\)) stalls.*/\1/p' "$tmp/$1.out" | head -1)
  if [[ -n $stalled_pid ]] && alive "$stalled_pid"; then
    echo "FAIL $1: the stalled rank (pid $stalled_pid) outlived the job"
    kill -9 "$stalled_pid"
    [[ $failures -eq $2 ]] && failures=$((failures + 1))
  fi
}
check_stalled_gone stall "$before"

# The same under --accumulate 2 (step 3 = the third optimizer step, after 4 micro-batches with
# one all-reduce each step), and an error there.
o_acc=("${opts[@]}" --accumulate 2)
before=$failures
expect stall_accumulate 'rank 0 of 2: .*waited 3 s without completion' ANVIL_DIST_TIMEOUT=3 \
  ANVIL_TEST_FAULT=stall@1:3 -- "${o_acc[@]}" "${ck[@]}" : "${o_acc[@]}" "${ck[@]}"
check_stalled_gone stall_accumulate "$before"
expect error_accumulate 'rank 1 of 2: .*test fault \(ANVIL_TEST_FAULT\) on rank 1 at step 3' \
  $long ANVIL_TEST_FAULT=error@1:3 -- "${o_acc[@]}" "${ck[@]}" : "${o_acc[@]}" "${ck[@]}"

# The same under --shard-optimizer (ZeRO-1: reduce-scatter and all-gather instead of the
# all-reduce; no checkpoint with it, so the checkpoint given to the others is not passed).
o_shard=("${opts[@]}" --shard-optimizer)
before=$failures
expect stall_shard 'rank 0 of 2: .*(reduce_scatter|all_gather).*waited 3 s without completion' \
  ANVIL_DIST_TIMEOUT=3 ANVIL_TEST_FAULT=stall@1:3 -- "${o_shard[@]}" : "${o_shard[@]}"
check_stalled_gone stall_shard "$before"
expect error_shard 'rank 1 of 2: .*test fault \(ANVIL_TEST_FAULT\) on rank 1 at step 3' \
  $long ANVIL_TEST_FAULT=error@1:3 -- "${o_shard[@]}" : "${o_shard[@]}"

# A stall under bf16 gradient buckets (Note [bf16 gradient buckets]): the bf16 all-reduce times
# out as the f32 one does. Only the stall: an error on one rank does not depend on the buckets.
o_bf16=("${opts[@]}" --grad-bucket-dtype bf16)
before=$failures
expect stall_bf16 'rank 0 of 2: .*all_reduce sum bf16.*waited 3 s without completion' \
  ANVIL_DIST_TIMEOUT=3 ANVIL_TEST_FAULT=stall@1:3 -- \
  "${o_bf16[@]}" "${ck[@]}" : "${o_bf16[@]}" "${ck[@]}"
check_stalled_gone stall_bf16 "$before"

# The same under the all-reduce algorithms of the communication thread (Note [All-reduce
# algorithms]): the stalled peer leaves that thread blocked in MPI; the wait must still time out
# and the job end. 1 KiB chunks: each all-reduce is many chunks.
for algo in chunked ring; do
  before=$failures
  expect "stall_$algo" 'rank 0 of 2: .*all_reduce.*waited 3 s without completion' ANVIL_DIST_TIMEOUT=3 \
    ANVIL_ALLREDUCE=$algo ANVIL_ALLREDUCE_CHUNK_KIB=1 ANVIL_TEST_FAULT=stall@1:3 -- \
    "${opts[@]}" "${ck[@]}" : "${opts[@]}" "${ck[@]}"
  check_stalled_gone "stall_$algo" "$before"
  expect "error_$algo" 'rank 1 of 2: .*test fault \(ANVIL_TEST_FAULT\) on rank 1 at step 3' \
    $long ANVIL_ALLREDUCE=$algo ANVIL_TEST_FAULT=error@1:3 -- "${opts[@]}" "${ck[@]}" : \
    "${opts[@]}" "${ck[@]}"
done

if [[ $failures -ne 0 ]]; then echo "FAIL: $failures case(s)"; exit 1; fi
echo "PASS"
